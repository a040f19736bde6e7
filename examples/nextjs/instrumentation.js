// Runs once when the server starts: connect to Redis before the first request arrives.
export async function register() {
  if (process.env.NEXT_RUNTIME === 'nodejs') {
    const { connected } = await import('./lib/redis.js')
    await connected(2000)
  }
}
