/** Redis' main-thread CPU so far (INFO cpu, user + sys), in µs: what a script costs Redis, read around a run. */
export async function redisCpuUs(client: { sendCommand(args: string[]): Promise<unknown> }): Promise<number> {
  const info = String(await client.sendCommand(['INFO', 'cpu']))
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1])
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1])
  return (sys + user) * 1e6
}
