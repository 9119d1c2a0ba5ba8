// Types of Tally's JavaScript client (index.js, served by every node at
// /client.js). The protocol is docs/api.md's.

export type Code =
  | "invalid_request" | "unauthorized" | "poll_not_found" | "quiz_not_found" | "not_found" | "poll_not_open"
  | "poll_closed" | "too_large" | "invalid_option" | "rate_limited" | "internal" | "unavailable" | "edge_node"
  | "records_lost" | "poll_not_closed" | "session_required" | "session_invalid" | "session_expired"
  | "session_mismatch" | "puzzle_failed" | "upgrade_required" | "too_many_polls" | "result_hidden"
  | "already_answered" | "too_late" | "quiz_ended" | "idem_conflict" | "join_code_not_found" | "outcome_unknown"
  | "stamp_ahead" | "no_copy" | "cross_site" | "network"
  /** The client's own: subscribe on a runtime with neither WebSocket nor EventSource. */
  | "no_websocket";

export const codes: readonly Code[];

export class TallyError extends Error {
  constructor(code: Code, message?: string, opts?: { status?: number; retryAfter?: number });
  code: Code;
  /** The HTTP status; 0 for a refusal on the socket or no answer. */
  status: number;
  /** Seconds, from Retry-After (429, 503, 504); 0 when none. */
  retryAfter: number;
}

export interface Vote {
  option: string; voter?: string; idem?: string;
  /** The newest stamp held for the poll; the client sets it when not given. */
  after?: string;
}
export interface VoteResult {
  idem: string; status: "accepted" | "duplicate" | "late" | "rejected"; vote_id?: string; error?: string;
  /** What the node stamped the vote that counts for this key with, "wall.logical" (not on a rejected one). */
  stamp?: string;
  /** The vote's receipt, signed by the replica that ledgered it (not on a rejected one); the client keeps it: receipts(poll). */
  receipt?: Receipt;
}

/** A vote's receipt (docs/auditing.md, "Receipts"; Go: receipt.Receipt). */
export interface Receipt {
  poll: string;
  /** "REPLICA/SEQ": the replica that ledgered the vote, and signed this. */
  vote_id: string;
  /** "WALL.LOGICAL", as the answer gave it. */
  stamp: string;
  /** The SHA-256 of the ledger record's canonical bytes, 64 lowercase hex digits. */
  leaf: string;
  /** Ed25519, standard base64, over "tally receipt v1\n" + poll, vote_id, stamp and leaf, each followed by "\n". */
  sig: string;
}

/** What became of a ledgered vote under the certified rule. */
export type Disposition = "counted" | "superseded" | "late" | "duplicate" | "filtered";

/** A record's fields a voter reads (Go: receipt.Vote). */
export interface ReceiptVote { vote_id: string; voter: string; option: string; stamp: string }

/** The certificate's signed tree head (Go: receipt.TreeHead). */
export interface TreeHead { poll: string; size: number; root: string; digest: string; by: string; sig: string }

/** GET /v1/polls/{poll}/proofs/{leaf} (Go: receipt.Proof). */
export interface Proof {
  leaf: string;
  index: number;
  /**
   * The audit path (RFC 9162 §2.1.3), hex, leaf to root, from the leaf SHA-256(0x00 ‖ the record's hash ‖ the
   * disposition's byte: counted 1, superseded 2, late 3, filtered 4, duplicate 5). Null (Go's JSON of an empty
   * path: a tree of one record) is empty.
   */
  path: string[] | null;
  /** The record's canonical bytes, base64. */
  record: string;
  vote: ReceiptVote;
  disposition: Disposition;
  /**
   * For a superseded record, the voter's counted one; for a duplicate, the copy of its key that stands (not a
   * duplicate) when it is the voter's. Always another record than this one.
   */
  counted?: Proof | null;
  tree_head?: TreeHead;
}

/** /v1/cluster/keys's body, its list, or replica → standard base64 public key. */
export type ReplicaKeys = { keys: { replica: string; public_key: string }[] } | { replica: string; public_key: string }[] | Record<string, string>;

/**
 * GET /v1/polls/{poll}/result (Go: api.ResultView): what verifyReceipt reads of it. A proof's tree head must be
 * detail.tree, field by field, of a result whose status is "reconciled", and name its digest.
 */
export interface CertifiedResult {
  poll: string;
  /** "reconciled", or "pending" (not certified, or the certificate withdrawn). */
  status: string;
  certified_by?: string;
  digest?: string;
  detail?: { tree?: TreeHead; [field: string]: unknown };
  [field: string]: unknown;
}

export interface VerifyOptions {
  /** The node the keys, the proof and the certified result are fetched from (each when not given, or null); required unless keys and proof are both given. */
  baseUrl?: string;
  fetch?: typeof fetch;
  /**
   * Without baseUrl, null is no keys: the check fails at "signature". A list with a replica twice, or with any
   * replica's key not 32 bytes of canonical standard base64, is refused whole: "malformed".
   */
  keys?: ReplicaKeys | null;
  /** Without baseUrl, null (or anything not a proof) is a result, step "malformed", not a throw. */
  proof?: Proof | null;
  /**
   * The poll's certified result, for use offline: the proof's tree head is checked against it (as it is against
   * the one fetched from baseUrl when not given, or null). Without baseUrl and without result the check cannot be
   * made: the verdict says certificate: "unchecked". Without baseUrl, null (or anything not an object) is step
   * "malformed".
   */
  result?: CertifiedResult | null;
}

export type Verification =
  | {
    ok: true; disposition: Disposition;
    /** The receipt's vote, from its record. */
    vote: ReceiptVote;
    /** For a superseded vote (or a duplicate whose standing copy is the voter's): the voter's vote that counts instead, with its disposition. */
    counted?: ReceiptVote & { disposition: Disposition };
    /** The certificate's tree: its size, its root, and the replica that certified it. */
    size: number; root: string; by: string;
    /**
     * "checked": the proof's tree head is the certified result's (fetched from baseUrl, or opts.result).
     * "unchecked": neither baseUrl nor result was given, so the tree head was checked only for its signature by
     * the key of the replica it names — any listed key, an edge's included, or of a certificate since withdrawn.
     * Treat an "unchecked" verdict as proving nothing about the certified result until a result is given.
     */
    certificate: "checked" | "unchecked";
  }
  | {
    ok: false;
    /**
     * The step that failed: "malformed" (the receipt, the proof, the keys or the result cannot be read, or not as
     * strictly as Go reads them: an unknown field, a field of another type, base64 that is not canonical, a replica
     * listed twice, a key not 32 bytes), "signature" (the receipt's), "certificate" (the tree head's signature or
     * fields, or it is not the certified result's, or the result is not reconciled), "record" (the proof's record
     * is not the receipt's vote, or its counted one not the voter's), "path" (the audit path is malformed or leads
     * nowhere), "root" (it leads to another root than the certificate's); or why there is no check yet: "pending"
     * (409, not certified), "unknown" (404, no proof of that leaf), "network" (no answer, or a refusal; a 404 for
     * the result too), "unsupported" (no WebCrypto Ed25519 here: a page over plain HTTP off localhost).
     */
    step: "malformed" | "signature" | "certificate" | "record" | "path" | "root" | "pending" | "unknown" | "network" | "unsupported";
    message: string;
  };

/**
 * Checks a receipt against the certified result, as Go's receipt.Verify does, with WebCrypto, then (as tally
 * receipt verify does) that the proof's tree head is the certified result's, when it has a baseUrl or a result
 * (else certificate: "unchecked"). It resolves, never rejects on what it is given or fetched; it rejects with a
 * TypeError only when it has no baseUrl and keys or proof is left out (undefined). A proof given as null is a
 * result: {ok: false, step: "malformed"}.
 */
export function verifyReceipt(receipt: unknown, opts?: VerifyOptions): Promise<Verification>;
/** Where a receipt's proof is served: /v1/polls/{poll}/proofs/{leaf}. */
export function proofPath(poll: string, leaf: string): string;
export interface VoteResponse { results: VoteResult[]; server_time: number }
export interface Session {
  token: string; voter: string; expires_at: number;
  /** The node's clock at issue. */
  server_time?: number;
  /** expires_at on this device's clock (set by the client). */
  expires_local?: number;
}

/** A poll's live state: the snapshot's fields, totals kept up to date by the diffs. */
export interface LiveState {
  type: "snapshot" | "diff" | "final" | "heartbeat";
  poll: string;
  seq: number;
  as_of_ms: number;
  tick_ms?: number;
  status: "scheduled" | "open" | "closed" | "reconciled";
  totals: Record<string, number>;
  total: number;
  hidden: boolean;
  /** True once the certified result arrived (a final frame). */
  final: boolean;
  digest?: string;
  leader?: string;
  viewers?: number;
  votes_per_min?: number;
  question?: string;
  options?: { id: string; label: string }[];
  opens_at?: number;
  closes_at?: number;
  regions?: Record<string, number>;
  [field: string]: unknown;
}

export interface TallyOptions {
  /** The node's (or edge's) base URL. */
  url: string;
  fetch?: typeof fetch;
  WebSocket?: unknown;
  EventSource?: unknown;
  /** Where the voter session, the polls' newest stamps and the votes' receipts are kept between visits (e.g. localStorage). */
  storage?: { getItem(key: string): string | null; setItem(key: string, value: string): void; removeItem?(key: string): void } | null;
  /**
   * Extra headers for every request (or a function returning them at each
   * request); also for sockets where the WebSocket takes headers (Node's).
   */
  headers?: Record<string, string> | (() => Record<string, string>) | null;
}

export interface LiveOptions {
  /** "websocket", "sse", or "reconnecting" with the delay in ms. */
  onConn?: (how: "websocket" | "sse" | "reconnecting", delayMs?: number) => void;
  /** How long votes gather before they go out together; default 400. */
  batchMs?: number;
  /** The longest reconnect delay; default 10000. */
  maxDelayMs?: number;
  /** A socket not open this long after it was asked for is given up and tried again; default 10000. */
  openMs?: number;
  /** An open socket on which nothing (not even the node's 15 s heartbeat) arrived this long is given up and tried again; default 40000. */
  staleMs?: number;
}

export class Tally {
  constructor(opts: TallyOptions);
  url: string;
  token: Session | null;
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<any>;
  poll(id: string): Promise<any>;
  result(id: string): Promise<any>;
  /**
   * A refused solution (puzzle_failed) is followed by a new challenge, twice at most.
   * The token held before (refused, or expired) is sent as "previous": the new one keeps its voter.
   */
  session(solve?: (challenge: string, bits: number) => Promise<string>): Promise<Session>;
  /**
   * Votes over HTTP, each with "after" = stamp(poll); 504 outcome_unknown is
   * sent again (same keys and body) until definitive, 30 s at most; a token
   * refused as another network's is replaced by one for the same voter and
   * the votes sent again, once.
   */
  vote(poll: string, votes: Vote | Vote[]): Promise<VoteResponse>;
  /** The newest stamp the client was answered for the poll, or null. */
  stamp(poll: string): string | null;
  /**
   * The receipts of the poll's vote answers this client was given (kept in storage too, when given): the newest
   * five by stamp, oldest first; the last is the voter's latest vote.
   */
  receipts(poll: string): Receipt[];
  /** verifyReceipt against this node (its url and fetch). */
  verifyReceipt(receipt: unknown, opts?: Omit<VerifyOptions, "baseUrl">): Promise<Verification>;
  /**
   * Follows the poll until the Live's close(). Throws a TallyError "no_websocket"
   * on a runtime with neither WebSocket nor EventSource (Node 20 without
   * --experimental-websocket): pass the WebSocket option, or run with the flag.
   */
  subscribe(poll: string, onChange: (state: LiveState) => void, opts?: LiveOptions): Live;
  quiz(id: string, onChange: (frame: QuizFrame) => void, opts?: QuizOptions): QuizLive;
}

/** A frame of the quiz's stream (docs/api.md, "The quiz's stream"). */
export interface QuizFrame {
  type: "quiz";
  quiz: string;
  seq: number;
  as_of_ms: number;
  title: string;
  status: "ready" | "question" | "between" | "ended";
  current: number;
  started: number;
  total: number;
  /** Participants joined across the cluster (the lobby's count). */
  joined: number;
  /** In the lobby: the display names of the newest participants who joined at this node, newest first (at most 8). */
  newest?: string[];
  question?: {
    index: number; poll: string; text: string; options: { id: string; label: string }[];
    status: "scheduled" | "open" | "closed" | "reconciled"; opens_at: number; closes_at: number;
    limit_ms: number; points: number; revealed: boolean; answers: number; correct?: string[]; totals?: Record<string, number>;
  };
  leaderboard?: { rank: number; participant: string; name?: string; score: number }[];
  participants?: number;
  leaderboard_digest?: string;
  leaderboard_final?: boolean;
  [field: string]: unknown;
}

export interface Standing { rank: number; participant: string; name?: string; score: number; correct: number; elapsed_ms: number; answered: number }

export interface QuizOptions {
  /** The participant's voter id (default: the session's): joins the stream for their standing. */
  voter?: string;
  onStanding?: (you: Standing | null) => void;
  /** "websocket", "reconnecting" with the delay, or "http": reading the quiz every pollMs after three failed sockets. */
  onConn?: (how: "websocket" | "reconnecting" | "http", delayMs?: number) => void;
  maxDelayMs?: number;
  /** How often the quiz is read over HTTP without a socket; default 1000. */
  pollMs?: number;
  /** A socket not open this long after it was asked for is given up and tried again; default 10000. */
  openMs?: number;
  /** An open socket on which nothing (not even the node's 15 s heartbeat) arrived this long is given up and tried again; default 40000. */
  staleMs?: number;
}

export class QuizLive {
  frame: QuizFrame | null;
  /** The server's clock as this stream knows it, ms. */
  now(): number;
  /** The open question's time left by the server's clock, ms (0: none open). */
  remainingMs(): number;
  /** The first answer stands; a second rejects with already_answered, a late one with too_late. */
  answer(a: { option: string; name?: string; voter?: string; idem?: string }): Promise<VoteResult & { elapsed_ms?: number; score?: number }>;
  /** Names the participant on the stream (done on every connect); call again when it changes. */
  join(voter: string, name?: string): Promise<{ type: "ack" | "error"; result?: { voter: string; server_time: number }; error?: { code: ErrorCode; message: string } } | null>;
  close(): void;
}

export class Live {
  state: LiveState | null;
  vote(v: Vote): Promise<VoteResult>;
  close(): void;
}

/** Orders two stamps ("wall.logical"): -1, 0 or 1; a non-stamp comes first. */
/** uuid is a random version 4 UUID, in a secure context or not (a page over plain HTTP). */
export function uuid(): string;

export function compareStamps(a: string | null | undefined, b: string | null | undefined): -1 | 0 | 1;
/** The later of two stamps, or null when neither is one. */
export function laterStamp(a: string | null | undefined, b: string | null | undefined): string | null;

/** The node's proof of work: in a Worker from this module where a page can start one, else in slices here. */
export function solvePuzzle(challenge: string, bits: number): Promise<string>;

/** The characters of join codes. */
export const JOIN_ALPHABET: string;
/** The six-character code a viewer types to join a poll, an event (its current poll) or a quiz (GET /v1/join/{code}, /j/{code}). */
export function joinCode(kind: "poll" | "event" | "quiz", id: string): string;
