/**
 * What the HTTP layer reads of a request besides the framework object: the client address and the
 * matched route. Every adapter builds one per request; {@link FrameworkFacts} is that object for all
 * of them, an adapter overriding only how the address is found.
 * @module
 */

/**
 * What an adapter knows about a request without a framework object. `ip` is read only when the default
 * key or a `key` function's `info.ip()` needs it, so an adapter may make it a getter (Hono, Express):
 * a `key` function that never asks for the address does not pay for it.
 */
export interface RequestFacts {
  /** The client address as the framework resolved it (through its own trust-proxy setting). */
  readonly ip: string | undefined
  /**
   * Not used: the method never enters the key, since a client chooses it freely (a route mounted for
   * every method would otherwise give each method a budget of its own).
   * @deprecated not read by the HTTP layer; an adapter need not set it
   */
  readonly method?: string
  /** The matched route template (`/users/:id`) when the middleware is mounted on a route. */
  readonly route?: string
}

/**
 * The request facts of a framework request: the request and its matched route, with the client
 * address read from the request's own `ip` (Express, Fastify, NestJS: a getter that walks the trusted
 * proxies) only when the key needs it. An adapter whose request carries no address (Hono, fetch)
 * extends it and overrides `ip`. Built once per request; the fields are plain assignments, so an
 * instance costs one small object.
 *
 * @example
 * await http.check(req, new FrameworkFacts(req, http.needsRoute ? req.route?.path : undefined))
 */
export class FrameworkFacts<Req> implements RequestFacts {
  // `declare`: plain assignments in the constructor, not class fields defined on every instance.
  /** The framework's request. */
  declare protected readonly req: Req
  declare readonly route: string | undefined
  constructor(req: Req, route: string | undefined) {
    this.req = req
    this.route = route
  }
  get ip(): string | undefined {
    return (this.req as { readonly ip?: string }).ip
  }
}
