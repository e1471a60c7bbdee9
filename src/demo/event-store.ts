// A bounded in-memory EventStore for the MCP SDK's resumability: every SSE event gets an id, and
// a client reconnecting with Last-Event-ID receives the events of that stream it missed.
// One store per MCP session, so an event id can never replay another session's stream.
import type { EventId, EventStore, StreamId } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

interface StoredEvent {
  readonly seq: number;
  readonly streamId: StreamId;
  readonly message: JSONRPCMessage;
}

export class InMemoryEventStore implements EventStore {
  // Map keeps insertion order, which is event order: the oldest entry is evicted first.
  private readonly events = new Map<EventId, StoredEvent>();
  private seq = 0;

  constructor(private readonly maxEvents = 1000) {}

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const seq = ++this.seq;
    const id = String(seq);
    this.events.set(id, { seq, streamId, message });
    if (this.events.size > this.maxEvents) {
      const oldest = this.events.keys().next().value;
      if (oldest !== undefined) this.events.delete(oldest);
    }
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId: EventId, { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> }): Promise<StreamId> {
    const last = this.events.get(lastEventId);
    if (!last) return "";
    for (const [id, event] of this.events) {
      // Priming events are stored as empty messages: they only carry an id, nothing to replay.
      if (event.seq > last.seq && event.streamId === last.streamId && Object.keys(event.message).length > 0) {
        await send(id, event.message);
      }
    }
    return last.streamId;
  }
}
