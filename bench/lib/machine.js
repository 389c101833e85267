// What the numbers were measured on.
import os from "node:os";

/** Machine and runtime facts for the report header. */
export function describeMachine() {
  const cpus = os.cpus();
  return {
    cpu: `${cpus[0]?.model?.trim() ?? "unknown CPU"} × ${cpus.length}`,
    memory: `${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    v8: process.versions.v8,
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    loadAtStart: os.loadavg()[0],
  };
}

/** One-minute load average now (to show how busy the machine was while measuring). */
export function currentLoad() {
  return os.loadavg()[0];
}
