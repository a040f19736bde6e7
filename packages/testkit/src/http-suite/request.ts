/**
 * The suite's HTTP client: one request over a fresh connection (no pooling, so `close()` never waits
 * on the suite), with the path sent byte for byte.
 */
import http from 'node:http'
import type { SuiteResponse } from './types'

/**
 * One HTTP request over a fresh connection (no pooling, so `close()` never waits on the suite), with the
 * path sent byte for byte (no URL normalisation: `//`, `%31`, `;x` reach the server as written).
 */
export function request(
  baseUrl: string,
  path: string,
  init: {
    method?: string
    headers?: Record<string, string>
    body?: unknown
    /** Give up (reject) when no answer comes in this long: a hang fails its test instead of stalling it. */
    giveUpMs?: number
  } = {},
): Promise<SuiteResponse> {
  const url = new URL(baseUrl)
  const body = init.body === undefined ? undefined : JSON.stringify(init.body)
  const headers: Record<string, string> = { ...init.headers }
  if (body !== undefined) {
    headers['content-type'] = 'application/json'
    headers['content-length'] = String(Buffer.byteLength(body))
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path, method: init.method ?? 'GET', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', reject)
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) })
        })
      },
    )
    req.on('error', reject)
    if (init.giveUpMs !== undefined) {
      req.setTimeout(init.giveUpMs, () =>
        req.destroy(new Error(`no answer to ${init.method ?? 'GET'} ${path} in ${init.giveUpMs} ms`)),
      )
    }
    req.end(body)
  })
}
