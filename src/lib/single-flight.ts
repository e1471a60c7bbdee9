// Concurrent callers asking for the same key share one running promise (one database read, one
// upstream call), which is forgotten as soon as it settles.
export class SingleFlight<V> {
  private readonly running = new Map<string, Promise<V>>();

  run(key: string, work: () => Promise<V>): Promise<V> {
    const existing = this.running.get(key);
    if (existing) return existing;
    const flight = work().finally(() => this.running.delete(key));
    this.running.set(key, flight);
    return flight;
  }
}
