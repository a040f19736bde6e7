// Runs before the matched routes (on Node.js): limits the home page per client address.
import { withRateLimit } from '@tollgate/fetch'
import { NextResponse } from 'next/server'
import { ip, pages } from './lib/tollgate.js'

export const proxy = withRateLimit(() => NextResponse.next(), { limiter: pages, ip })

export const config = { matcher: '/' }
