"""
Tollgate's scripts from Python: a worker in another language spends from the same budget as the Node
processes, exactly, because the state lives only in Redis and every decision is one Lua script.

This module follows the contract in docs/scripts.md: it builds the same keys (`identity_tag`, `key`),
sends the same KEYS and ARGV to the complete scripts that `@tollgate/core` publishes in its `lua/`
folder (`consume.lua`, `peek.lua`, `refund.lua`, `reset.lua`), with EVALSHA and, on NOSCRIPT, EVAL.

Needs redis-py (Debian: `apt-get install python3-redis`; pip: `pip install redis`).

    import redis
    from tollgate import Limiter, Policy

    limiter = Limiter(redis.Redis(), 'api', [Policy(None, 'sliding-window', 100, 60_000)])
    d = limiter.consume('user:42')
    if not d.allowed:
        print('retry in', d.retry_after_ms, 'ms')

Run as a script (`python3 tollgate.py '<json>'`) it executes a list of operations and prints the
decisions as JSON: that is how the contract test (packages/core/test/scripts/python-contract.test.ts) drives it.
"""

import base64
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field

import redis

ALGORITHM_CODES = {'fixed-window': 1, 'sliding-window': 2, 'sliding-log': 3, 'token-bucket': 4, 'gcra': 5}
# A key's signature: what its state means (docs/scripts.md, "Keys").
SIGNATURE_CODES = {'fixed-window': 'fw', 'sliding-window': 'sw', 'sliding-log': 'sl', 'token-bucket': 'tb',
                   'gcra': 'gc', 'concurrency': 'cc'}

# The published scripts: beside this repository's core package, or in an installed @tollgate/core.
LUA_DIRS = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'packages', 'core', 'lua'),
    os.path.join(os.getcwd(), 'node_modules', '@tollgate', 'core', 'lua'),
]

UNSAFE = re.compile(r'[{}\x00-\x1f\x7f]')
MAX_IDENTITY_BYTES = 128


def _hashed(data: bytes) -> str:
    return '~h:' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')[:32]


def identity_tag(identity: str) -> str:
    """The part of a key between the braces (docs/scripts.md, "Keys")."""
    try:
        raw = identity.encode()
    except UnicodeEncodeError:  # a lone surrogate: hashed from its UTF-16 code units
        return _hashed(b'\xff' + identity.encode('utf-16-le', 'surrogatepass'))
    if len(raw) > MAX_IDENTITY_BYTES or UNSAFE.search(identity) or identity.startswith('~h:'):
        return _hashed(raw)
    return identity


def signature(algorithm: str, window_ms: int) -> str:
    """`<alg>-<window>`, the window as its shortest exact duration: `sw-1m`, `fw-15m`, `gc-1500ms`."""
    for ms, unit in ((86_400_000, 'd'), (3_600_000, 'h'), (60_000, 'm'), (1000, 's')):
        if window_ms % ms == 0:
            return f'{SIGNATURE_CODES[algorithm]}-{window_ms // ms}{unit}'
    return f'{SIGNATURE_CODES[algorithm]}-{window_ms}ms'


def key(prefix: str, identity: str, sig: str, policy: 'str | None' = None) -> str:
    tag = identity_tag(identity)
    return f'{prefix}:{{{tag}}}:{sig}' if policy is None else f'{prefix}:{{{tag}}}:{policy}:{sig}'


@dataclass(frozen=True)
class Policy:
    """One policy. `name` None is a limiter built with `limit`/`window` in Node (its key has no policy name)."""

    name: 'str | None'
    algorithm: str
    limit: int
    window_ms: int
    burst: 'int | None' = None

    def args(self) -> list:
        burst = self.burst if self.burst is not None else self.limit
        return [ALGORITHM_CODES[self.algorithm], self.limit, self.window_ms, burst]


@dataclass
class PolicyDecision:
    policy: 'str | None'
    allowed: bool
    remaining: int
    reset_ms: int
    retry_after_ms: 'int | None'  # None: never (cost above the policy's capacity)
    tag: int


@dataclass
class Decision:
    allowed: bool
    now_us: int
    keys: list
    policies: list = field(default_factory=list)

    @property
    def retry_after_ms(self) -> 'int | None':
        refused = [p.retry_after_ms for p in self.policies if not p.allowed]
        if not refused:
            return 0
        return None if None in refused else max(refused)


class Script:
    def __init__(self, name: str, lua_dir: 'str | None' = None):
        for folder in [lua_dir] if lua_dir else LUA_DIRS:
            path = os.path.join(folder, f'{name}.lua')
            if os.path.exists(path):
                with open(path, 'rb') as f:
                    self.source = f.read()
                break
        else:
            raise FileNotFoundError(
                f'{name}.lua not found in {lua_dir or LUA_DIRS}: in a checkout, `node scripts/gen-lua.mjs` writes them'
            )
        # The file is byte for byte what Tollgate's Node side sends: the same SHA1, one script cache.
        self.sha1 = hashlib.sha1(self.source).hexdigest()

    def __call__(self, client: redis.Redis, keys: list, args: list):
        try:
            return client.evalsha(self.sha1, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            # Restart, failover, SCRIPT FLUSH, a new node: EVAL caches it again. Retry nothing else.
            return client.eval(self.source, len(keys), *keys, *args)


class Limiter:
    def __init__(self, client: redis.Redis, prefix: str, policies: list, lua_dir: 'str | None' = None):
        self.client, self.prefix, self.policies = client, prefix, policies
        self.scripts = {name: Script(name, lua_dir) for name in ('consume', 'peek', 'refund', 'reset')}

    def keys(self, identity) -> list:
        """`identity`: one string for every policy, or a dict policy name -> identity."""
        return [
            key(
                self.prefix,
                identity if isinstance(identity, str) else identity[p.name],
                signature(p.algorithm, p.window_ms),
                p.name,
            )
            for p in self.policies
        ]

    def _decide(self, script: str, identity, cost: int) -> Decision:
        keys = self.keys(identity)
        args = [cost] + [a for p in self.policies for a in p.args()]
        reply = self.scripts[script](self.client, keys, args)
        d = Decision(allowed=reply[1] == 1, now_us=reply[0], keys=keys)
        for i, p in enumerate(self.policies):
            allowed, remaining, reset_ms, retry, tag = reply[2 + 5 * i : 7 + 5 * i]
            d.policies.append(PolicyDecision(p.name, allowed == 1, remaining, reset_ms, None if retry == -1 else retry, tag))
        return d

    def consume(self, identity, cost: int = 1) -> Decision:
        return self._decide('consume', identity, cost)

    def peek(self, identity, cost: int = 1) -> Decision:
        return self._decide('peek', identity, cost)

    def refund(self, decision: Decision, cost: int, spend_id: 'str | None' = None, spent: 'int | None' = None) -> None:
        """Gives `cost` back to an admitted decision. With `spend_id` (unique to that decision) it is
        idempotent: never more than `spent` (the decision's cost) in total, however often it is sent."""
        if not decision.allowed:
            return
        keys = list(decision.keys)
        args = [cost]
        for p, pd in zip(self.policies, decision.policies):
            args += p.args() + [pd.tag]
        if spend_id is not None:
            keys.append(f'{keys[0]}!{spend_id}')
            args.append(spent if spent is not None else cost)
        self.scripts['refund'](self.client, keys, args)

    def reset(self, identity) -> int:
        return self.scripts['reset'](self.client, self.keys(identity), [])


def _main(spec: dict) -> dict:
    """Runs spec['ops'] in order: 'consume', 'peek', 'reset', or ['refund', i, cost, spend_id?]
    (refunds the i-th decision of this run). Prints every decision."""
    client = redis.Redis.from_url(spec['url'])
    policies = [Policy(p.get('name'), p['algorithm'], p['limit'], p['window_ms'], p.get('burst')) for p in spec['policies']]
    limiter = Limiter(client, spec['prefix'], policies)
    identity, cost = spec['identity'], spec.get('cost', 1)
    out, decisions = [], []
    for op in spec['ops']:
        if op in ('consume', 'peek'):
            d = getattr(limiter, op)(identity, cost)
            decisions.append(d)
            out.append({'op': op, 'allowed': d.allowed, 'policies': [vars(p) for p in d.policies]})
        elif op == 'reset':
            out.append({'op': op, 'existed': limiter.reset(identity)})
        elif op[0] == 'refund':
            _, i, refund_cost, *spend = op
            limiter.refund(decisions[i], refund_cost, spend[0] if spend else None, cost)
            out.append({'op': 'refund'})
    return {
        'keys': limiter.keys(identity),
        'sha1': {name: s.sha1 for name, s in limiter.scripts.items()},
        'results': out,
    }


if __name__ == '__main__':
    print(json.dumps(_main(json.loads(sys.argv[1]))))
