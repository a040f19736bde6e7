/** Runs the `tollgate` command line in-process (its `run`, what the bin calls) and keeps what it printed. */

/** The `io` the CLI's `run` writes to. */
export interface CliIo {
  out(line: string): void
  err(line: string): void
  tty: boolean
}

/** What one run printed: its exit code, stdout and stderr, and both in the order written. */
export interface CliRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  readonly out: string
}

/**
 * @example
 * const { code, stdout } = await runCli(run, ['override', 'get', 'key:acme', '--prefix', 'api'])
 */
export async function runCli(
  run: (args: string[], io: CliIo) => Promise<number>,
  args: string[],
  tty = false,
): Promise<CliRun> {
  let stdout = ''
  let stderr = ''
  let out = ''
  const code = await run(args, {
    out: (line) => {
      stdout += `${line}\n`
      out += `${line}\n`
    },
    err: (line) => {
      stderr += `${line}\n`
      out += `${line}\n`
    },
    tty,
  })
  return { code, stdout, stderr, out }
}
