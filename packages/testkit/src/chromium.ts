/**
 * Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol on a pipe
 * (`--remote-debugging-pipe`: NUL-terminated JSON on fds 3 and 4), so no WebSocket client or browser
 * download is needed. In CI (`CI=true`) a missing browser fails the test that needs it; elsewhere the
 * test is skipped with a message naming the install command.
 * @module
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Readable, Writable } from 'node:stream'

export const CHROMIUM_INSTALL = 'apt-get install -y chromium'

/** `CHROMIUM_BIN`, else `chromium` on PATH. */
export function findChromium(): string | undefined {
  if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN
  try {
    return (
      execFileSync('which', ['chromium'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() ||
      undefined
    )
  } catch {
    return undefined
  }
}

/**
 * `.ci/run` installs the browser in the background while the tests run, and names a file that says
 * `pending`, then `ok` or `failed`: a test needing it waits in its `beforeAll` (see {@link chromiumReady}).
 */
const INSTALL_STATUS = process.env.TOLLGATE_CHROMIUM_STATUS

/** For a test file: the browser, or undefined (skip) outside CI; under `CI=true` a missing one throws. */
export function chromiumForTests(): string | undefined {
  const bin = findChromium()
  if (bin) return bin
  if (INSTALL_STATUS !== undefined && fs.existsSync(INSTALL_STATUS)) return 'chromium' // being installed
  const why = `chromium is not installed (${CHROMIUM_INSTALL})`
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`${why} (CI=true)`)
  console.warn(`[testkit] ${why}: the browser tests are skipped`)
  return undefined
}

/** The browser's path once a background install (if any) has ended; throws if that install failed. */
export async function chromiumReady(bin: string, timeoutMs = 600_000): Promise<string> {
  if (INSTALL_STATUS === undefined || !fs.existsSync(INSTALL_STATUS)) return bin
  const until = Date.now() + timeoutMs
  for (;;) {
    const status = fs.readFileSync(INSTALL_STATUS, 'utf8').trim()
    if (status === 'ok') {
      const found = findChromium()
      if (found) return found
      throw new Error(`chromium was installed but is not on PATH (${INSTALL_STATUS})`)
    }
    if (status !== 'pending')
      throw new Error(`installing chromium failed: see the log beside ${INSTALL_STATUS}`)
    if (Date.now() > until) throw new Error(`chromium still installing after ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
}

export interface BrowserPage {
  /** The value of `expression` (awaited), or the page's exception as an error. */
  evaluate<T = unknown>(expression: string): Promise<T>
  /** Polls `expression` until it is truthy; its value. */
  waitFor<T = unknown>(expression: string, timeoutMs?: number): Promise<T>
  /** A PNG of the viewport. */
  screenshot(): Promise<Buffer>
}

export interface Browser {
  open(url: string, size?: { width: number; height: number }): Promise<BrowserPage>
  close(): Promise<void>
}

/** Starts headless Chromium with a throwaway profile. */
export async function launchChromium(bin: string): Promise<Browser> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-chromium-'))
  const child: ChildProcess = spawn(
    bin,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-dev-shm-usage',
      '--remote-debugging-pipe',
      `--user-data-dir=${profile}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] },
  )
  const input = child.stdio[3] as Writable
  const output = child.stdio[4] as Readable
  let nextId = 1
  const waiting = new Map<number, { resolve(v: any): void; reject(e: Error): void }>()
  let buffer = ''
  output.setEncoding('utf8')
  output.on('data', (chunk: string) => {
    buffer += chunk
    let end = buffer.indexOf('\0')
    while (end >= 0) {
      const message = JSON.parse(buffer.slice(0, end)) as {
        id?: number
        result?: unknown
        error?: { message: string }
      }
      buffer = buffer.slice(end + 1)
      end = buffer.indexOf('\0')
      const w = message.id === undefined ? undefined : waiting.get(message.id)
      if (!w) continue
      waiting.delete(message.id as number)
      if (message.error) w.reject(new Error(message.error.message))
      else w.resolve(message.result)
    }
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.once('exit', () => {
    for (const w of waiting.values()) w.reject(new Error('chromium exited'))
    waiting.clear()
  })
  const send = (method: string, params: object = {}, sessionId?: string): Promise<any> =>
    new Promise((resolve, reject) => {
      const id = nextId++
      waiting.set(id, { resolve, reject })
      input.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`)
    })
  await send('Browser.getVersion')
  return {
    async open(url, size = { width: 1200, height: 900 }) {
      const { targetId } = await send('Target.createTarget', { url: 'about:blank' })
      const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true })
      await send(
        'Emulation.setDeviceMetricsOverride',
        { ...size, deviceScaleFactor: 1, mobile: false },
        sessionId,
      )
      await send('Page.navigate', { url }, sessionId)
      const evaluate = async <T>(expression: string): Promise<T> => {
        const r = await send(
          'Runtime.evaluate',
          { expression, awaitPromise: true, returnByValue: true },
          sessionId,
        )
        if (r.exceptionDetails)
          throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text)
        return r.result.value as T
      }
      return {
        evaluate,
        async waitFor<T>(expression: string, timeoutMs = 8000): Promise<T> {
          const until = Date.now() + timeoutMs
          for (;;) {
            const value = await evaluate<T>(expression).catch(() => undefined)
            if (value) return value
            if (Date.now() > until) throw new Error(`timed out waiting for ${expression}`)
            await new Promise((r) => setTimeout(r, 100))
          }
        },
        async screenshot() {
          const { data } = await send('Page.captureScreenshot', { format: 'png' }, sessionId)
          return Buffer.from(data as string, 'base64')
        },
      }
    },
    async close() {
      await send('Browser.close').catch(() => undefined)
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
      await exited
      clearTimeout(timer)
      fs.rmSync(profile, { recursive: true, force: true })
    },
  }
}
