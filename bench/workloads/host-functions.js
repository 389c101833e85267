// The host side of the host-call workloads: the same trivial function for every engine, so
// what is measured is the boundary crossing, not the work.

/** Synchronous host function exposed to the guest as `host(i)`. */
export function hostSync(i) {
  return i + 1;
}

/** Asynchronous host function exposed to the guest as `host(i)`; the guest awaits it. */
export async function hostAsync(i) {
  return i + 1;
}

/** Sum the guest computes over 10,000 calls of either host function. */
export const HOST_CALL_SUM = (10000 * 10001) / 2;
