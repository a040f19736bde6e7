/**
 * The framework-neutral limits: `gate.open(identity)` takes a connection's lease (or refuses), the
 * connection renews it while open, counts each message, and ends the lease once on close. The ws and
 * Socket.IO integrations are thin layers over this.
 * @module
 */
import type { Decision, KeyInput, RateLimiter } from '@tollgate/core'
import { type ConnectionInfo, type Cost, checkGateOptions, type GateOptions } from './options'
import { type RateLimitedFrame, rateLimitedFrame } from './refusal'

/** What `open` answers: a connection, or the refusal to send as the close reason. */
export type Admission =
  | { readonly allowed: true; readonly connection: Connection; readonly decision: Decision | undefined }
  | { readonly allowed: false; readonly refusal: RateLimitedFrame; readonly decision: Decision }

/** An open connection's share of the limits. */
export interface Connection extends ConnectionInfo {
  /**
   * Counts one message (at `cost`, else the option's cost); the refusal frame to reply with when it is
   * over a limit, else undefined.
   */
  message(data: unknown, cost?: Cost): Promise<RateLimitedFrame | undefined>
  /** Ends the lease (once; later calls do nothing). Call it when the socket closes, however it closed. */
  close(): Promise<void>
}

export class ConnectionGate {
  readonly options: GateOptions
  /** How often an open connection renews its lease: half the shortest lease. */
  readonly renewEveryMs: number
  /** The renewal under way per identity (one at a time in this process). @internal */
  readonly renewals = new Map<string, Promise<void>>()

  /** Throws ConfigError on a bad option. */
  constructor(options: GateOptions) {
    checkGateOptions(options, [])
    this.options = options
    const leases = options.connections?.policies.map((p) => p.windowMs) ?? []
    this.renewEveryMs = leases.length ? Math.max(1, Math.floor(Math.min(...leases) / 2)) : 0
  }

  /**
   * Admits a connection of `identity`, or refuses it. `onLost` runs if the lease cannot be renewed
   * later (the identity's slot was taken meanwhile): close the socket with the frame it is given.
   */
  async open(identity: string, onLost?: (refusal: RateLimitedFrame) => void): Promise<Admission> {
    const { connections } = this.options
    let decision: Decision | undefined
    if (connections) {
      decision = await connections.consume(identity)
      if (!decision.allowed) return { allowed: false, refusal: rateLimitedFrame(decision), decision }
    }
    const connection = new OpenConnection(this, identity, decision, onLost)
    return { allowed: true, connection, decision }
  }
}

/** Waits between the tries of a renewal that found the slot it freed taken (ms). */
const RETRIES_MS = [20, 50, 100]

class OpenConnection implements Connection {
  readonly connectionId = crypto.randomUUID()
  private closed = false
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(
    private readonly gate: ConnectionGate,
    readonly identity: string,
    private lease: Decision | undefined,
    private readonly onLost?: (refusal: RateLimitedFrame) => void,
  ) {
    if (lease && gate.renewEveryMs > 0) {
      this.timer = setInterval(() => void this.renew().catch(() => {}), gate.renewEveryMs)
      this.timer.unref?.()
    }
  }

  /**
   * A new lease is taken before the old one ends, so the count never dips. At the identity's limit that
   * overlap is refused: the old lease ends first and is taken again at once; if another connection took
   * the slot in that instant, this one is lost. A store outage keeps the old lease until the next try.
   */
  private renew(): Promise<void> {
    // one renewal at a time per identity in this process: two at the limit would each free a slot the
    // other then takes
    const chain = this.gate.renewals
    const previous = chain.get(this.identity) ?? Promise.resolve()
    const mine = previous.then(() => this.renewNow())
    const settled = mine.catch(() => {})
    chain.set(this.identity, settled)
    void settled.then(() => {
      if (chain.get(this.identity) === settled) chain.delete(this.identity)
    })
    return mine
  }

  private async renewNow(): Promise<void> {
    const limiter = this.gate.options.connections
    const old = this.lease
    if (!limiter || !old || this.closed) return
    let next = await limiter.consume(this.identity)
    if (!next.allowed) {
      if (next.source === 'fallback') return // the store is not answering: keep the lease, try again later
      await limiter.release(old)
      next = await limiter.consume(this.identity)
      // another process renewing at the limit may have taken the slot just freed, its own old lease about
      // to end: a few short tries before this connection counts as lost
      for (let i = 0; !next.allowed && next.source !== 'fallback' && i < RETRIES_MS.length; i++) {
        await new Promise((r) => setTimeout(r, RETRIES_MS[i]))
        if (this.closed) return
        next = await limiter.consume(this.identity)
      }
    } else await limiter.release(old).catch(() => {})
    if (this.closed) {
      await limiter.release(next).catch(() => {})
      return
    }
    this.lease = next
    if (!next.allowed) {
      this.lease = undefined
      this.stop()
      this.onLost?.(rateLimitedFrame(next))
    }
  }

  async message(data: unknown, given?: Cost): Promise<RateLimitedFrame | undefined> {
    const { messages, cost } = this.gate.options
    if (!messages) return undefined
    const spend: Cost = given ?? (typeof cost === 'function' ? cost(data, this) : (cost ?? 1))
    const decision = await messages.consume(this.key(messages), { cost: spend })
    return decision.allowed ? undefined : rateLimitedFrame(decision)
  }

  private key(messages: RateLimiter): KeyInput {
    const perConnection = this.gate.options.perConnection
    if (!perConnection?.length) return this.identity
    const key: Record<string, string> = {}
    for (const { name } of messages.policies) {
      key[name] = perConnection.includes(name) ? `conn:${this.connectionId}` : this.identity
    }
    return key
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.stop()
    const lease = this.lease
    this.lease = undefined
    if (lease) await this.gate.options.connections?.release(lease)
  }
}
