import { withRateLimit } from '@tollgate/fetch'
import { api, ip } from '../../../lib/tollgate.js'

export const dynamic = 'force-dynamic'

export const GET = withRateLimit(() => Response.json({ hello: 'world' }), {
  limiter: api,
  ip,
  route: '/api/hello',
})
