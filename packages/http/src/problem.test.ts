import {
  badRequestProblem,
  problemDetails,
  QUOTA_EXCEEDED_TYPE,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  unavailableProblem,
} from './problem'
import { burst, daily, decide } from './test-decisions'

describe('problem details (RFC 9457)', () => {
  it('429 names the violated policies in order', () => {
    const d = decide([
      { ...burst, allowed: false, remaining: 0, retryAfterMs: 100 },
      { ...daily, allowed: false, remaining: 0, retryAfterMs: 40_000 },
    ])
    expect(problemDetails(d)).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      'violated-policies': ['burst', 'daily'],
    })
    expect(problemDetails(d).type).toBe(QUOTA_EXCEEDED_TYPE)
  })

  it('429 lists only refusing policies', () => {
    const d = decide([burst, { ...daily, allowed: false, remaining: 0, retryAfterMs: 40_000 }])
    expect(problemDetails(d)['violated-policies']).toEqual(['daily'])
  })

  it('503 for reduced capacity', () => {
    expect(unavailableProblem(5000)).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      title: 'Request cannot be satisfied due to temporary server capacity constraints',
      status: 503,
      detail: 'Retry after 5 seconds.',
    })
    expect(unavailableProblem(1)).toMatchObject({ detail: 'Retry after 1 second.' })
    expect(unavailableProblem()).toEqual({
      type: TEMPORARY_REDUCED_CAPACITY_TYPE,
      title: 'Request cannot be satisfied due to temporary server capacity constraints',
      status: 503,
    })
    expect(unavailableProblem(Infinity)).not.toHaveProperty('detail')
  })

  it('serialises to the JSON the draft shows', () => {
    const d = decide([burst, { ...daily, allowed: false, remaining: 0, retryAfterMs: 40_000 }])
    expect(JSON.stringify(problemDetails(d))).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",' +
        '"title":"Request cannot be satisfied as assigned quota has been exceeded",' +
        '"status":429,"violated-policies":["daily"]}',
    )
  })

  it('400 carries the reason in detail', () => {
    expect(badRequestProblem('cost(req) must be a non-negative safe integer')).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'cost(req) must be a non-negative safe integer',
    })
  })
})
