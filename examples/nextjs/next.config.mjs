/** @type {import('next').NextConfig} */
export default {
  // In this repository the Tollgate packages resolve to their TypeScript sources; from npm they are
  // built JavaScript and need no entry here.
  transpilePackages: ['@tollgate/core', '@tollgate/fetch'],
  // node-redis stays a plain Node dependency (loaded at run time, not bundled).
  serverExternalPackages: ['redis'],
}
