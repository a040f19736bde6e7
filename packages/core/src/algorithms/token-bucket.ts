/**
 * token-bucket: `burst` whole tokens, one more every ceil(window_us / limit) us. Twin of
 * `lua/algorithms/token-bucket.lua`. In any interval of length L: at most burst + floor(L / interval) units.
 *
 * Its state is one number F, the time the bucket is full again (tokens now =
 * floor((burst x interval - (F - now)) / interval)): the number gcra calls the TAT, with the same
 * decisions, so the twin is gcra's under another code. A refund gives back only what the bucket has not refilled yet.
 * @module
 */
import { tatTwin } from './gcra'

export const tokenBucket = tatTwin(4)
