/**
 * The response with its body passed through untouched: `done` runs once the body has been read to its
 * end (or failed), `cancelled` when the reader cancels it (the client went away). An adapter settles a
 * decision, or ends a concurrency lease, from these when the body is read after its handler returned (a
 * stream). Pull-based, so it works where TransformStream has no cancel hook (Node 20, workerd).
 * @example
 * return onBodyEnd(res, () => settle(res.status, res), () => release(res))
 */
export function onBodyEnd(res: Response, done: () => unknown, cancelled: () => unknown): Response {
  const reader = res.body!.getReader()
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>
      try {
        chunk = await reader.read()
      } catch (error) {
        controller.error(error)
        done()
        return
      }
      if (chunk.done) {
        controller.close()
        done()
      } else controller.enqueue(chunk.value)
    },
    cancel(reason) {
      cancelled()
      return reader.cancel(reason)
    },
  })
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
}
