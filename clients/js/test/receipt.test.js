// verifyReceipt against the Go side's fixture (receipt/testdata/fixture.json,
// written by go test ./receipt -run TestFixture -update): every case's
// verdict or failing step; trees of every size up to 17 built here from
// RFC 9162's definition over 33-byte leaves (the record's hash, then its
// disposition's byte), each leaf proved; a poll built here with a change
// of mind and retries, and proofs pointing at themselves; the proof and
// keys fetched (404, 409, no answer); hostile input, which gives a step
// and never a throw; and the receipts the client keeps from vote answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Tally, verifyReceipt, proofPath } from "../index.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const fixture = JSON.parse(readFileSync(join(repo, "receipt", "testdata", "fixture.json"), "utf8"));
const byName = Object.fromEntries(fixture.cases.map(c => [c.name, c]));
const copy = x => structuredClone(x);
const STEPS = ["malformed", "signature", "certificate", "record", "path", "root", "pending", "unknown", "network", "unsupported"];

// verdict is what a case's "want" says of a result.
const verdict = r => r.ok ? r.disposition : `error:${r.step}`;

// HONEST is the fixture's certified tree head (eu-1's, the counted case's);
// resultOf is GET /v1/polls/{poll}/result's answer (an api.ResultView) of
// a certificate holding the tree head h.
const HONEST = byName.counted.proof.tree_head;
const resultOf = (h, more = {}) => ({
  poll: h.poll, status: "reconciled", coordinator: "node-" + h.by, certified_by: h.by, decided_at: 1796040100000,
  totals: { blue: 2, green: 1 }, total: 3, digest: h.digest,
  detail: { coordinator: "node-" + h.by, closes_at: 1796040050000, tree: copy(h) }, ...more,
});
const RESULT_PATH = `/v1/polls/${HONEST.poll}/result`;

test("every fixture case gives its verdict, or fails at its step", async () => {
  assert.ok(fixture.cases.length >= 20, "the fixture holds its cases");
  for (const c of fixture.cases) {
    // Without a result, the tree head is not compared with the certificate's (certificate "unchecked"); with the
    // certified result of the fixture's poll (its honest tree head, or the case's own result if it gives one), the
    // same verdict, "checked".
    const unchecked = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: c.proof });
    const result = c.result ?? resultOf(HONEST);
    const r = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: c.proof, result });
    if (!c.result) assert.equal(verdict(unchecked), c.want, `${c.name} (${c.about}), no result: ${unchecked.message ?? ""}`);
    assert.equal(verdict(r), c.want, `${c.name} (${c.about}): ${r.message ?? ""}`);
    if (r.ok) {
      assert.equal(unchecked.certificate, "unchecked", c.name);
      assert.equal(r.certificate, "checked", c.name);
      assert.deepEqual(c.proof.tree_head, HONEST, `${c.name}: an honest case's tree head is the certified one`);
      assert.deepEqual(r.vote, c.proof.vote, c.name);
      assert.equal(r.size, c.proof.tree_head.size);
      assert.equal(r.root, c.proof.tree_head.root);
      assert.equal(r.by, c.proof.tree_head.by);
      if (c.proof.counted) assert.deepEqual(r.counted, { ...c.proof.counted.vote, disposition: c.proof.counted.disposition }, c.name);
      else assert.equal(r.counted, undefined, c.name);
    } else {
      assert.equal(typeof r.message, "string");
    }
  }
});

test("the fixture's leaves bind the disposition: forged dispositions fail at root, a record pointing at itself at record", async () => {
  const wants = {
    "disposition-forged-late-as-counted": "error:root",
    "disposition-forged-superseded-as-counted": "error:root",
    "superseded-pointing-at-itself": "error:record",
  };
  for (const [name, want] of Object.entries(wants)) {
    const c = byName[name];
    assert.ok(c, `the fixture has the case ${name}`);
    assert.equal(c.want, want, name);
    assert.equal(verdict(await verifyReceipt(c.receipt, { keys: fixture.keys, proof: c.proof })), want, name);
  }
  // Each honest case said to be of every other disposition leads to another root: the path is checked
  // before what the disposition asks of the counted proof, as Go's Verify does.
  for (const name of ["counted", "late", "filtered", "superseded", "duplicate"]) {
    const c = byName[name];
    for (const d of ["counted", "superseded", "late", "filtered", "duplicate"].filter(d => d !== c.want)) {
      const r = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: { ...copy(c.proof), disposition: d } });
      assert.equal(verdict(r), "error:root", `${name} said ${d}: ${r.message}`);
    }
  }
});

test("the superseded case names the vote that counts instead", async () => {
  const c = byName.superseded;
  const r = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: c.proof });
  assert.equal(r.ok, true);
  assert.equal(r.vote.option, "red");
  assert.equal(r.counted.option, "blue");
  assert.equal(r.counted.voter, r.vote.voter);
  assert.equal(r.counted.disposition, "counted");
});

test("keys may be given as the endpoint's body, its list, or {replica: key}", async () => {
  const c = byName.counted;
  const map = Object.fromEntries(fixture.keys.keys.map(k => [k.replica, k.public_key]));
  for (const keys of [fixture.keys, fixture.keys.keys, map]) {
    assert.equal((await verifyReceipt(c.receipt, { keys, proof: c.proof })).disposition, "counted");
  }
  // Without the certifier's key, the tree head cannot be checked.
  const noCertifier = fixture.keys.keys.filter(k => k.replica !== c.proof.tree_head.by);
  assert.equal(verdict(await verifyReceipt(c.receipt, { keys: noCertifier, proof: c.proof })), "error:certificate");
});

// server answers GET requests from routes (path → [status, body]), and
// counts them.
function server(routes) {
  const asked = [];
  const f = async (url, opts) => {
    asked.push(url);
    assert.ok(!opts?.method || opts.method === "GET");
    const path = new URL(url).pathname;
    const [status, body] = routes[path] ?? [404, { error: { code: "not_found", message: "no such endpoint" } }];
    if (status === 0) throw new TypeError("fetch failed");
    return new Response(typeof body === "string" ? body : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  };
  return { f, asked };
}

test("the keys and the proof are fetched from baseUrl; 404 is unknown, 409 pending, no answer network", async () => {
  const c = byName.counted;
  const path = proofPath(c.receipt.poll, c.receipt.leaf);
  assert.equal(path, `/v1/polls/fixture-poll/proofs/${c.receipt.leaf}`);
  const ok = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof], [RESULT_PATH]: [200, resultOf(HONEST)] });
  const got = await verifyReceipt(c.receipt, { baseUrl: "http://node.test/", fetch: ok.f });
  assert.equal(verdict(got), "counted");
  assert.equal(got.certificate, "checked");
  assert.deepEqual(ok.asked, ["http://node.test/v1/cluster/keys", "http://node.test" + path, "http://node.test" + RESULT_PATH]);

  const cases = [
    [[409, { error: { code: "poll_not_certified", message: "not certified yet" } }], "pending", /not certified yet/],
    [[404, { error: { code: "not_found", message: "no record has that leaf" } }], "unknown", /no record has that leaf/],
    [[0, null], "network", /no answer/],
    [[500, { error: { code: "internal", message: "oops" } }], "network", /oops/],
    [[200, "not json"], "malformed", /not JSON/],
    [[200, "[1,2]"], "malformed", /not an object/],
    [[200, " ".repeat(70 << 10) + "{}"], "malformed", /not JSON/],
  ];
  for (const [answer, step, message] of cases) {
    const s = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: answer, [RESULT_PATH]: [200, resultOf(HONEST)] });
    const r = await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: s.f });
    assert.equal(r.ok, false);
    assert.equal(r.step, step, `${answer[0]}: ${r.message}`);
    assert.match(r.message, message);
  }
  // A receipt whose signature fails is not taken further: no proof asked for.
  const bad = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof] });
  const forged = byName["receipt-stamp-changed"].receipt;
  assert.equal(verdict(await verifyReceipt(forged, { baseUrl: "http://node.test", fetch: bad.f })), "error:signature");
  assert.deepEqual(bad.asked, ["http://node.test/v1/cluster/keys"]);
  // The keys unreachable.
  const down = server({ "/v1/cluster/keys": [0, null] });
  assert.equal(verdict(await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: down.f })), "error:network");
  // Nowhere to fetch from is the caller's mistake.
  await assert.rejects(verifyReceipt(c.receipt, { keys: fixture.keys }), TypeError);
  await assert.rejects(verifyReceipt(c.receipt, { proof: c.proof }), TypeError);
  await assert.rejects(verifyReceipt(c.receipt), TypeError);
  // With a baseUrl, a proof or keys given as null is fetched.
  const nulls = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof], [RESULT_PATH]: [200, resultOf(HONEST)] });
  assert.equal(verdict(await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: nulls.f, keys: null, proof: null, result: null })), "counted");
  assert.equal(nulls.asked.length, 3);
});

// edgeKit is a key of a replica the keys list too (an edge's, say), and
// a one-record tree it signs for the fixture's poll: the late case's
// record said "counted", in a tree of its own, validly signed, the
// proof of which holds in every step but the certificate's.
async function edgeKit() {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const pub = b64(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)));
  const keys = { keys: [...fixture.keys.keys, { replica: "edge-1", public_key: pub }] };
  const sign = async msg => b64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, enc.encode(msg))));
  const signHead = async h => ({ ...h, sig: await sign(`tally tree head v1\n${h.poll}\n${h.size}\n${h.root}\n${h.digest}\n${h.by}\n`) });
  const late = byName.late;
  const root = hexOf(await sha([0], Buffer.from(late.proof.leaf, "hex"), [CODE.counted]));
  const head = await signHead({ poll: HONEST.poll, size: 1, root, digest: HONEST.digest, by: "edge-1" });
  const forged = { ...copy(late.proof), index: 0, path: [], disposition: "counted", tree_head: head };
  // The honest tree, its head signed again by the edge: every field the same but by and sig.
  const resigned = { ...copy(byName.counted.proof), tree_head: await signHead({ ...HONEST, by: "edge-1" }) };
  return { keys, late, forged, resigned, signHead };
}

test("a tree head validly signed by another listed key is not the certified result's: certificate", async () => {
  const { keys, late, forged, resigned } = await edgeKit();
  const counted = byName.counted;
  // Without a result to compare with, the forgery holds: the check says so.
  const blind = await verifyReceipt(late.receipt, { keys, proof: forged });
  assert.equal(verdict(blind), "counted", blind.message);
  assert.equal(blind.certificate, "unchecked");
  assert.equal(blind.by, "edge-1");
  // With the certified result, given or fetched, it fails at "certificate", naming what differs.
  let r = await verifyReceipt(late.receipt, { keys, proof: forged, result: resultOf(HONEST) });
  assert.equal(verdict(r), "error:certificate", r.message);
  assert.match(r.message, /size, root, by, sig differ/);
  assert.match(r.message, new RegExp(`the result's root ${HONEST.root}, the proof's ${forged.tree_head.root}`));
  const path = proofPath(late.receipt.poll, late.receipt.leaf);
  const s = server({ "/v1/cluster/keys": [200, keys], [path]: [200, forged], [RESULT_PATH]: [200, resultOf(HONEST)] });
  r = await verifyReceipt(late.receipt, { baseUrl: "http://node.test", fetch: s.f });
  assert.equal(verdict(r), "error:certificate", r.message);
  assert.deepEqual(s.asked.map(u => new URL(u).pathname), ["/v1/cluster/keys", path, RESULT_PATH]);
  // The honest tree's head signed by the edge instead of the certifier.
  assert.equal(verdict(await verifyReceipt(counted.receipt, { keys, proof: resigned })), "counted");
  r = await verifyReceipt(counted.receipt, { keys, proof: resigned, result: resultOf(HONEST) });
  assert.equal(verdict(r), "error:certificate", r.message);
  assert.match(r.message, /by, sig differ; the result's by eu-1, the proof's edge-1/);
  // The same tree head in the result: it holds.
  r = await verifyReceipt(counted.receipt, { keys, proof: resigned, result: resultOf(resigned.tree_head) });
  assert.equal(verdict(r), "counted", r.message);
  assert.equal(r.certificate, "checked");
});

test("the certified result: reconciled, its tree head the proof's field by field, its digest the tree head's", async () => {
  const { keys, signHead } = await edgeKit();
  const c = byName.superseded;
  const check = async result => verifyReceipt(c.receipt, { keys, proof: c.proof, result });
  let r = await check(resultOf(HONEST));
  assert.equal(verdict(r), "superseded", r.message);
  assert.equal(r.certificate, "checked");
  assert.equal(r.counted.option, "blue");
  // Not reconciled: pending (the certificate withdrawn, or not yet made), or any other word.
  for (const status of ["pending", "Reconciled", "", undefined, null, 1]) {
    r = await check(resultOf(HONEST, { status }));
    assert.equal(verdict(r), "error:certificate", `status ${status}: ${r.message}`);
    assert.match(r.message, /not certified/);
  }
  // A pending result as the node writes it: no detail.
  r = await check({ poll: HONEST.poll, status: "pending", reason: "the poll is not closed", coordinator: "node-eu-1" });
  assert.equal(verdict(r), "error:certificate");
  // No tree head in it (a certificate from before receipts), or one that is no object.
  for (const detail of [undefined, null, {}, { tree: null }, { tree: "x" }, "x"]) {
    r = await check(resultOf(HONEST, { detail }));
    assert.equal(verdict(r), "error:certificate", `detail ${JSON.stringify(detail)}: ${r.message}`);
    assert.match(r.message, /no tree head/);
  }
  // Each field of its tree head changed: certificate, naming it.
  const other = await signHead({ ...HONEST, by: "edge-1" });
  const changed = { poll: "other-poll", size: HONEST.size + 1, root: "ab".repeat(32), digest: "cd".repeat(32), by: "us-1", sig: other.sig };
  for (const [k, v] of Object.entries(changed)) {
    const result = resultOf(HONEST);
    result.detail.tree[k] = v;
    r = await check(result);
    assert.equal(verdict(r), "error:certificate", `tree.${k}: ${r.message}`);
    assert.match(r.message, new RegExp(`: ${k} differs`), `tree.${k}`);
  }
  // The size as a string, or the sig written otherwise: not the same.
  for (const [k, v] of [["size", String(HONEST.size)], ["sig", HONEST.sig.replace(/=+$/, "")]]) {
    const result = resultOf(HONEST);
    result.detail.tree[k] = v;
    assert.equal(verdict(await check(result)), "error:certificate", `tree.${k} ${v}`);
  }
  // Another poll's result, or another digest than the tree head's.
  assert.equal(verdict(await check(resultOf(HONEST, { poll: "other-poll" }))), "error:certificate");
  r = await check(resultOf(HONEST, { digest: "cd".repeat(32) }));
  assert.equal(verdict(r), "error:certificate");
  assert.match(r.message, /digest/);
  // Not an object at all: malformed, as a proof that is none is.
  for (const result of [null, "x", 1, [resultOf(HONEST)]]) {
    r = await check(result);
    assert.equal(verdict(r), "error:malformed", `${JSON.stringify(result)}: ${r.message}`);
  }
  // A check that fails before it is not made, nor the result asked for.
  const nowhere = async () => { throw new Error("fetched"); };
  r = await verifyReceipt(c.receipt, { keys, proof: { ...copy(c.proof), disposition: "counted" }, baseUrl: "http://node.test", fetch: nowhere });
  assert.equal(verdict(r), "error:root");
});

test("the certified result fetched: 409 pending, 404 or 5xx or no answer network, not JSON malformed", async () => {
  const c = byName.duplicate;
  const path = proofPath(c.receipt.poll, c.receipt.leaf);
  const cases = [
    [[200, resultOf(HONEST)], "duplicate"],
    [[409, { error: { code: "poll_not_certified", message: "not certified yet" } }], "error:pending", /not certified yet/],
    [[404, { error: { code: "poll_not_found", message: "no poll" } }], "error:network", /no poll/],
    [[403, { error: { code: "result_hidden", message: "not revealed" } }], "error:network", /not revealed/],
    [[500, { error: { code: "internal", message: "oops" } }], "error:network", /oops/],
    [[503, "busy"], "error:network", /HTTP 503/],
    [[0, null], "error:network", /no answer/],
    [[200, "not json"], "error:malformed", /not JSON/],
    [[200, resultOf(HONEST, { status: "pending" })], "error:certificate", /not certified/],
    // A result of a large quiz question is read whole.
    [[200, resultOf(HONEST, { padding: "x".repeat(1 << 20) })], "duplicate"],
  ];
  for (const [answer, want, message] of cases) {
    const s = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof], [RESULT_PATH]: answer });
    const r = await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: s.f });
    assert.equal(verdict(r), want, `${answer[0]}: ${r.message}`);
    if (message) assert.match(r.message, message);
    else assert.equal(r.certificate, "checked");
    assert.equal(s.asked.at(-1), "http://node.test" + RESULT_PATH);
  }
  // A result given is not fetched, with a baseUrl too; null is.
  const s = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof], [RESULT_PATH]: [500, "no"] });
  assert.equal(verdict(await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: s.f, result: resultOf(HONEST) })), "duplicate");
  assert.equal(verdict(await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: s.f, result: null })), "error:network");
  // The client's verifyReceipt asks its node.
  const t = server({ "/v1/cluster/keys": [200, fixture.keys], [path]: [200, c.proof], [RESULT_PATH]: [200, resultOf(HONEST)] });
  const r = await new Tally({ url: "http://node.test", fetch: t.f }).verifyReceipt(c.receipt);
  assert.equal(r.certificate, "checked");
  assert.equal(t.asked.length, 3);
});

// nonCanonical is base64 s with the unused bits of its last character
// set: atob reads the same bytes, Go refuses it.
const nonCanonical = s => {
  const ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const at = s.replace(/=+$/, "").length - 1;
  assert.ok(s.endsWith("="), "padding leaves bits unused");
  return s.slice(0, at) + ALPHA[ALPHA.indexOf(s[at]) ^ 1] + s.slice(at + 1);
};

test("as strict as Go: unknown fields, counted of another type, keys twice or not 32 bytes, base64 not canonical", async () => {
  const c = byName.superseded;
  const keys = fixture.keys;
  const r = () => copy(c.receipt), p = () => copy(c.proof);
  const step = async (receipt, proof, k = keys) => {
    const got = await verifyReceipt(receipt, { keys: k, proof, result: resultOf(HONEST) });
    return [verdict(got), got.message];
  };
  const malformed = async (what, receipt, proof, k) => {
    const [got, message] = await step(receipt, proof, k);
    assert.equal(got, "error:malformed", `${what}: ${message}`);
  };
  assert.deepEqual((await step(r(), p()))[0], "superseded");
  // Unknown fields, anywhere; names are exact.
  await malformed("receipt extra", { ...r(), extra: 1 }, p());
  await malformed("receipt extra null", { ...r(), extra: null }, p());
  await malformed("receipt Poll", (({ poll, ...rest }) => ({ ...rest, Poll: poll }))(r()), p());
  await malformed("receipt __proto__", JSON.parse(JSON.stringify(r()).replace("{", '{"__proto__":{},')), p());
  await malformed("proof extra", r(), { ...p(), extra: "x" });
  await malformed("proof Leaf", r(), { ...p(), Leaf: p().leaf });
  await malformed("proof vote extra", r(), { ...p(), vote: { ...p().vote, extra: 0 } });
  await malformed("proof tree_head extra", r(), { ...p(), tree_head: { ...p().tree_head, extra: [] } });
  await malformed("proof tree_head Sig", r(), { ...p(), tree_head: { ...p().tree_head, Sig: p().tree_head.sig } });
  await malformed("counted extra", r(), { ...p(), counted: { ...p().counted, extra: {} } });
  await malformed("counted vote extra", r(), { ...p(), counted: { ...p().counted, vote: { ...p().counted.vote, extra: "" } } });
  await malformed("proof __proto__", r(), JSON.parse(JSON.stringify(p()).replace("{", '{"__proto__":null,')));
  // A field left out (undefined, as JSON would not write it) is no unknown one.
  assert.equal((await step({ ...r(), extra: undefined }, { ...p(), extra: undefined }))[0], "superseded");
  // Fields of another type than Go's.
  await malformed("vote a string", r(), { ...p(), vote: "x" });
  await malformed("vote option a number", r(), { ...p(), vote: { ...p().vote, option: 1 } });
  await malformed("tree_head a string", r(), { ...p(), tree_head: "x" });
  await malformed("tree_head size a string", r(), { ...p(), tree_head: { ...p().tree_head, size: "7" } });
  await malformed("path of numbers", r(), { ...p(), path: [1, 2, 3] });
  // counted: an object, absent or null; nothing else.
  for (const counted of [false, true, 0, 1, "", "x", []]) {
    await malformed(`counted ${JSON.stringify(counted)}`, r(), { ...p(), counted });
    await malformed(`counted's counted ${JSON.stringify(counted)}`, r(), { ...p(), counted: { ...p().counted, counted } });
  }
  const cc = byName.counted;
  for (const counted of [null, undefined]) {
    assert.equal(verdict(await verifyReceipt(cc.receipt, { keys, proof: { ...copy(cc.proof), counted } })), "counted", `counted ${counted}`);
  }
  assert.equal(verdict(await verifyReceipt(cc.receipt, { keys, proof: { ...copy(cc.proof), counted: false } })), "error:malformed");
  // The keys: a replica twice (with its key or another), or any replica's key not 32 bytes of canonical base64,
  // refuses the whole list, whichever replica the receipt names.
  const list = keys.keys;
  const other = list.find(k => k.replica === "us-1");
  const badKeys = {
    "us-1 twice": [...list, copy(other)],
    "us-1 twice, another key": [...list, { replica: "us-1", public_key: list[0].public_key }],
    "a key of 31 bytes": [...list, { replica: "zz-1", public_key: b64(new Uint8Array(31)) }],
    "a key of 33 bytes": [...list, { replica: "zz-1", public_key: b64(new Uint8Array(33)) }],
    "a key not base64": [...list, { replica: "zz-1", public_key: "not base64!" }],
    "a key left out": [...list, { replica: "zz-1" }],
    "a key a number": [...list, { replica: "zz-1", public_key: 7 }],
    "a replica a number": [...list, { replica: 7, public_key: other.public_key }],
    "an entry a string": [...list, "us-1"],
    "us-1's key with a newline": list.map(k => k === other ? { ...k, public_key: k.public_key.slice(0, 20) + "\n" + k.public_key.slice(20) } : k),
    "us-1's key unpadded": list.map(k => k === other ? { ...k, public_key: k.public_key.replace(/=+$/, "") } : k),
    "us-1's key not canonical": list.map(k => k === other ? { ...k, public_key: nonCanonical(k.public_key) } : k),
  };
  for (const [what, bad] of Object.entries(badKeys)) {
    for (const form of [{ keys: bad }, bad]) await malformed(`keys: ${what}`, r(), p(), form);
  }
  await malformed("keys map: a key of 31 bytes", r(), p(), { ...Object.fromEntries(list.map(k => [k.replica, k.public_key])), "zz-1": b64(new Uint8Array(31)) });
  for (const k of [7, "keys", true]) await malformed(`keys ${JSON.stringify(k)}`, r(), p(), k);
  // Fetched, the same.
  const path = proofPath(c.receipt.poll, c.receipt.leaf);
  const s = server({ "/v1/cluster/keys": [200, { keys: badKeys["us-1 twice"] }], [path]: [200, c.proof], [RESULT_PATH]: [200, resultOf(HONEST)] });
  const got = await verifyReceipt(c.receipt, { baseUrl: "http://node.test", fetch: s.f });
  assert.equal(verdict(got), "error:malformed");
  assert.match(got.message, /us-1.*twice/);
  assert.deepEqual(s.asked, ["http://node.test/v1/cluster/keys"]);
  // {keys: null} is no keys (Go's decoding of it): the receipt's key is not there.
  assert.equal((await step(r(), p(), { keys: null }))[0], "error:signature");
  // Base64 that is not canonical standard base64: whitespace, a newline, no padding, bits atob drops, URL-safe.
  const edits = {
    "with a newline": s => s.slice(0, 40) + "\n" + s.slice(40),
    "with a trailing newline": s => s + "\n",
    "with a space": s => s.slice(0, 40) + " " + s.slice(40),
    "unpadded": s => s.replace(/=+$/, ""),
    "URL-safe": s => s.replace(/\+/g, "-").replace(/\//g, "_"),
  };
  for (const [name, edit] of Object.entries(edits)) {
    const sig = r().sig, hsig = p().tree_head.sig, record = p().record, crecord = p().counted.record;
    if (edit(sig) !== sig) await malformed(`receipt sig ${name}`, { ...r(), sig: edit(sig) }, p());
    if (edit(hsig) !== hsig) await malformed(`tree_head sig ${name}`, r(), { ...p(), tree_head: { ...p().tree_head, sig: edit(hsig) } });
    if (edit(record) !== record) await malformed(`record ${name}`, r(), { ...p(), record: edit(record) });
    if (edit(crecord) !== crecord) await malformed(`counted record ${name}`, r(), { ...p(), counted: { ...p().counted, record: edit(crecord) } });
  }
  await malformed("receipt sig not canonical", { ...r(), sig: nonCanonical(r().sig) }, p());
  await malformed("tree_head sig not canonical", r(), { ...p(), tree_head: { ...p().tree_head, sig: nonCanonical(p().tree_head.sig) } });
  if (p().record.endsWith("=")) await malformed("record not canonical", r(), { ...p(), record: nonCanonical(p().record) });
  if (p().counted.record.endsWith("=")) await malformed("counted record not canonical", r(), { ...p(), counted: { ...p().counted, record: nonCanonical(p().counted.record) } });
  // A tree head sig of canonical base64 but not 64 bytes: the tree head's fault, as Go's Check says.
  assert.equal((await step(r(), { ...p(), tree_head: { ...p().tree_head, sig: b64(new Uint8Array(63)) } }))[0], "error:certificate");
});

test("a proof or keys given as null, with no baseUrl, is a result, not a throw", async () => {
  const c = byName.counted;
  let r;
  await assert.doesNotReject(async () => { r = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: null }); });
  assert.equal(verdict(r), "error:malformed", r.message);
  assert.match(r.message, /not an object/);
  await assert.doesNotReject(async () => { r = await verifyReceipt(c.receipt, { keys: null, proof: c.proof }); });
  assert.equal(verdict(r), "error:signature", r.message);
  await assert.doesNotReject(async () => { r = await verifyReceipt(c.receipt, { keys: null, proof: null }); });
  assert.equal(r.ok, false);
  assert.ok(STEPS.includes(r.step));
  // Nothing is fetched: there is nowhere to fetch from.
  const nowhere = async () => { throw new Error("fetched"); };
  r = await verifyReceipt(c.receipt, { keys: fixture.keys, proof: null, fetch: nowhere });
  assert.equal(verdict(r), "error:malformed");
});

test("hostile input gives a step, never a throw", async () => {
  const c = byName.superseded;
  const keys = fixture.keys;
  const r = () => copy(c.receipt), p = () => copy(c.proof);
  const huge = "a".repeat(1 << 20);
  const cases = {
    "receipt null": [null, p()], "receipt a number": [5, p()], "receipt a string": [JSON.stringify(c.receipt), p()],
    "receipt an array": [[c.receipt], p()], "receipt empty": [{}, p()],
    "no poll": [{ ...r(), poll: undefined }, p()], "poll a number": [{ ...r(), poll: 7 }, p()],
    "poll of a megabyte": [{ ...r(), poll: huge }, p()], "vote_id of a megabyte": [{ ...r(), vote_id: huge + "/1" }, p()],
    "stamp of a megabyte": [{ ...r(), stamp: "1." + "1".repeat(1 << 20) }, p()], "leaf of a megabyte": [{ ...r(), leaf: huge }, p()],
    "sig of a megabyte": [{ ...r(), sig: "A".repeat(1 << 20) }, p()], "sig not base64": [{ ...r(), sig: "!".repeat(88) }, p()],
    "sig unpadded": [{ ...r(), sig: r().sig.replace(/=+$/, "") }, p()], "sig too short": [{ ...r(), sig: "AAAA" }, p()],
    "vote_id no seq": [{ ...r(), vote_id: "ap-1" }, p()], "vote_id seq 0": [{ ...r(), vote_id: "ap-1/0" }, p()],
    "vote_id seq 01": [{ ...r(), vote_id: "ap-1/01" }, p()], "vote_id over uint64": [{ ...r(), vote_id: "ap-1/18446744073709551616" }, p()],
    "stamp no logical": [{ ...r(), stamp: "1796040001000" }, p()], "stamp negative": [{ ...r(), stamp: "-1.0" }, p()],
    "leaf upper case": [{ ...r(), leaf: r().leaf.toUpperCase() }, p()], "receipt __proto__ replica": [{ ...r(), vote_id: "__proto__/1" }, p()],
    "proof false": [r(), false], "proof a string": [r(), "{}"], "proof an array": [r(), []],
    "no tree head": [r(), { ...p(), tree_head: undefined }], "tree head a string": [r(), { ...p(), tree_head: "x" }],
    "tree head size a string": [r(), { ...p(), tree_head: { ...p().tree_head, size: "7" } }],
    "tree head size negative": [r(), { ...p(), tree_head: { ...p().tree_head, size: -1 } }],
    "tree head size huge": [r(), { ...p(), tree_head: { ...p().tree_head, size: 2 ** 64 } }],
    "tree head sig bad base64": [r(), { ...p(), tree_head: { ...p().tree_head, sig: "%%%%" } }],
    "record bad base64": [r(), { ...p(), record: "not base64!" }], "record a number": [r(), { ...p(), record: 12 }],
    "record of a megabyte": [r(), { ...p(), record: "A".repeat(1 << 20) }], "record empty": [r(), { ...p(), record: "" }],
    "path of 1000 entries": [r(), { ...p(), path: Array(1000).fill(p().path[0]) }],
    "path of 65 entries": [r(), { ...p(), path: Array(65).fill(p().path[0]) }],
    "path a string": [r(), { ...p(), path: p().path.join("") }], "path of numbers": [r(), { ...p(), path: [1, 2, 3] }],
    "path entry of a megabyte": [r(), { ...p(), path: [huge, ...p().path.slice(1)] }],
    "index negative": [r(), { ...p(), index: -1 }], "index a float": [r(), { ...p(), index: 0.5 }],
    "index huge": [r(), { ...p(), index: 2 ** 60 }], "index a string": [r(), { ...p(), index: "0" }],
    "vote missing": [r(), { ...p(), vote: undefined }], "vote a string": [r(), { ...p(), vote: "x" }],
    "disposition unknown": [r(), { ...p(), disposition: "won" }], "disposition a number": [r(), { ...p(), disposition: 1 }],
    "counted a string": [r(), { ...p(), counted: "x" }], "counted empty": [r(), { ...p(), counted: {} }],
    "counted nests": [r(), { ...p(), counted: { ...p().counted, counted: p().counted } }],
    "counted has a tree head": [r(), { ...p(), counted: { ...p().counted, tree_head: p().tree_head } }],
    "counted removed": [r(), { ...p(), counted: null }],
    "path null": [r(), { ...p(), path: null }], "path left out": [r(), { ...p(), path: undefined }],
    "counted is the record itself": [r(), { ...p(), counted: { ...p(), tree_head: undefined, counted: undefined, disposition: "counted" } }],
    "counted at the record's index": [r(), { ...p(), counted: { ...p().counted, index: p().index } }],
    "disposition __proto__": [r(), { ...p(), disposition: "__proto__" }], "disposition toString": [r(), { ...p(), disposition: "toString" }],
    "proof null": [r(), null],
  };
  for (const [name, [receipt, proof]] of Object.entries(cases)) {
    let res;
    await assert.doesNotReject(async () => { res = await verifyReceipt(receipt, { keys, proof }); }, name);
    assert.equal(res.ok, false, `${name}: ${JSON.stringify(res).slice(0, 200)}`);
    assert.ok(STEPS.includes(res.step), `${name}: step ${res.step}`);
    assert.equal(typeof res.message, "string");
  }
  // The Go reference's steps, where it names one.
  const step = async (receipt, proof) => (await verifyReceipt(receipt, { keys, proof })).step;
  assert.equal(await step(null, p()), "malformed");
  assert.equal(await step({ ...r(), sig: "!".repeat(88) }, p()), "malformed");
  assert.equal(await step(r(), { ...p(), path: Array(1000).fill(p().path[0]) }), "path");
  assert.equal(await step(r(), { ...p(), tree_head: undefined }), "certificate");
  assert.equal(await step(r(), { ...p(), disposition: "won" }), "record");
  assert.equal(await step(r(), { ...p(), disposition: "__proto__" }), "record");
  assert.equal(await step(r(), { ...p(), counted: { ...p().counted, disposition: "won" } }), "record");
  assert.equal(await step(r(), { ...p(), counted: null }), "record");
  assert.equal(await step(r(), { ...p(), counted: { ...p().counted, index: p().index } }), "record");
  assert.equal(await step(r(), { ...p(), counted: { ...p(), tree_head: undefined, counted: undefined, disposition: "counted" } }), "record");
  assert.equal(await step(r(), null), "malformed");
  // The leaf binds the disposition: a proof's edited, or its counted one's, leads to another root.
  assert.equal(await step(r(), { ...p(), disposition: "duplicate" }), "root");
  assert.equal(await step(r(), { ...p(), counted: { ...p().counted, disposition: "late" } }), "root");
  // A path null or left out is empty: a tree of seven needs one.
  assert.equal(await step(r(), { ...p(), path: null }), "path");
  assert.equal(await step(r(), { ...p(), path: undefined }), "path");
  assert.equal(await step(r(), { ...p(), index: 1 }), "root");
  assert.equal(await step(r(), { ...p(), index: 6 }), "path"); // the lone last leaf: a path of two
  assert.equal(await step(r(), { ...p(), index: 7 }), "path");
  assert.equal(await step(r(), { ...p(), path: [...p().path, p().path[0]] }), "path");
});

test("every field of a proof replaced by another type: a result, never a throw", async () => {
  const c = byName.superseded;
  const others = [null, 0, -1, 1e300, "", "x".repeat(100), [], [1], {}, true];
  const walk = (obj, prefix = []) => Object.entries(obj).flatMap(([k, v]) =>
    [[...prefix, k], ...(v && typeof v === "object" && !Array.isArray(v) ? walk(v, [...prefix, k]) : [])]);
  for (const [what, base] of [["receipt", c.receipt], ["proof", c.proof]]) {
    for (const path of walk(base)) {
      for (const other of others) {
        const changed = copy(base);
        path.slice(0, -1).reduce((o, k) => o[k], changed)[path.at(-1)] = other;
        const [receipt, proof] = what === "receipt" ? [changed, c.proof] : [c.receipt, changed];
        const res = await verifyReceipt(receipt, { keys: fixture.keys, proof });
        assert.ok(res.ok === false ? STEPS.includes(res.step) : res.disposition === "superseded", `${what}.${path.join(".")} = ${JSON.stringify(other)}`);
      }
    }
  }
});

// A poll built here, independently of the Go side: records encoded as
// ledger.Record.AppendBinary writes them, the tree by RFC 9162's
// definition (MTH, PATH), receipts and tree heads signed with a key made
// here. Every leaf of trees of 1 to 17 records is proved; a path one hash
// short or long fails at "path", a wrong sibling at "root".
const enc = new TextEncoder();
const uvarint = n => { const out = []; for (n = BigInt(n); n >= 0x80n; n >>= 7n) out.push(Number(n & 0x7fn) | 0x80); out.push(Number(n)); return out; };
const str = s => { const b = enc.encode(s); return [...uvarint(b.length), ...b]; };
const cat = (...parts) => { const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0)); let at = 0; for (const p of parts) { out.set(p, at); at += p.length; } return out; };
const sha = async (...parts) => new Uint8Array(await crypto.subtle.digest("SHA-256", cat(...parts)));
const hexOf = b => Buffer.from(b).toString("hex");
const b64 = b => Buffer.from(b).toString("base64");

function record({ poll, replica, seq, wall, logical, voter, option, idem }) {
  return cat([1], str(poll), str(replica), uvarint(seq), uvarint(wall), uvarint(logical), str(voter), str(option), str(idem),
    new Uint8Array(8) /* trust 0 */, [1] /* counted */, str(""), new Uint8Array(32) /* prev */);
}

// CODE is receipt.DispositionCode: a disposition's byte in its record's leaf.
const CODE = { counted: 1, superseded: 2, late: 3, filtered: 4, duplicate: 5 };
// leafOf is merkle.LeafOf: a leaf's data, the record's hash then its disposition's byte.
const leafOf = (hash, disposition) => cat(hash, [CODE[disposition]]);

// mth is RFC 9162 §2.1.1's Merkle Tree Hash of leaf entries (leafOf's 33 bytes).
async function mth(d) {
  if (d.length === 1) return sha([0], d[0]);
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return sha([1], await mth(d.slice(0, k)), await mth(d.slice(k)));
}

// auditPath is RFC 9162 §2.1.3.1's PATH(m, D[n]).
async function auditPath(m, d) {
  if (d.length === 1) return [];
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return m < k ? [...await auditPath(m, d.slice(0, k)), await mth(d.slice(k))] : [...await auditPath(m - k, d.slice(k)), await mth(d.slice(0, k))];
}

test("trees of 1 to 17 records built from RFC 9162's definition: every leaf proves, a path off by one or an edited disposition does not", async () => {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const key = b64(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)));
  const sign = async msg => b64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, enc.encode(msg))));
  const keys = [{ replica: "r-1", public_key: key }];
  for (let size = 1; size <= 17; size++) {
    const recs = Array.from({ length: size }, (_, i) => record({ poll: "tree", replica: "r-1", seq: i + 1, wall: 1796040000000 + 300 * i,
      logical: i * 70 /* two-byte varints from 2 on */, voter: `v-é${i}`, option: "o", idem: `k${i}` }));
    const hashes = await Promise.all(recs.map(r => sha(r)));
    // Each record's own disposition, none pointing at another: counted, late, filtered in turn.
    const disps = hashes.map((_, i) => ["counted", "late", "filtered"][i % 3]);
    const leaves = hashes.map((h, i) => leafOf(h, disps[i]));
    const root = hexOf(await mth(leaves));
    const head = { poll: "tree", size, root, digest: "ab".repeat(32), by: "r-1" };
    head.sig = await sign(`tally tree head v1\ntree\n${size}\n${root}\n${head.digest}\nr-1\n`);
    for (let i = 0; i < size; i++) {
      const receipt = { poll: "tree", vote_id: `r-1/${i + 1}`, stamp: `${1796040000000 + 300 * i}.${i * 70}`, leaf: hexOf(hashes[i]) };
      receipt.sig = await sign(`tally receipt v1\ntree\n${receipt.vote_id}\n${receipt.stamp}\n${receipt.leaf}\n`);
      const path = (await auditPath(i, leaves)).map(hexOf);
      const proof = { leaf: receipt.leaf, index: i, path, record: b64(recs[i]), disposition: disps[i], tree_head: head,
        vote: { vote_id: receipt.vote_id, voter: `v-é${i}`, option: "o", stamp: receipt.stamp } };
      const got = await verifyReceipt(receipt, { keys, proof });
      assert.equal(verdict(got), disps[i], `leaf ${i} of ${size}: ${got.message}`);
      const step = async p => (await verifyReceipt(receipt, { keys, proof: { ...proof, ...p } })).step;
      // Another disposition is another leaf: its path leads elsewhere; a word that is none fails at record.
      for (const other of ["counted", "late", "filtered"].filter(d => d !== disps[i])) {
        assert.equal(await step({ disposition: other }), "root", `leaf ${i} of ${size} as ${other}`);
      }
      assert.equal(await step({ disposition: "won" }), "record", `leaf ${i} of ${size}, an unknown disposition`);
      if (size === 1) {
        // Go's JSON writes a one-record tree's empty path as null.
        assert.equal(path.length, 0);
        assert.equal(verdict(await verifyReceipt(receipt, { keys, proof: { ...proof, path: null } })), disps[i], "a path null");
        assert.equal(verdict(await verifyReceipt(receipt, { keys, proof: JSON.parse(JSON.stringify({ ...proof, path: null })) })), disps[i]);
      }
      assert.equal(await step({ path: [...path, "00".repeat(32)] }), "path", `leaf ${i} of ${size}, a hash too many`);
      if (path.length) {
        assert.equal(await step({ path: path.slice(1) }), "path", `leaf ${i} of ${size}, a hash short`);
        assert.equal(await step({ path: path.map((h, j) => j === path.length - 1 ? "00".repeat(32) : h) }), "root", `leaf ${i} of ${size}, a sibling changed`);
      }
      // At another index the path is as long (its root differs) or not (it is no path of that index).
      const j = (i + 1) % size;
      if (j !== i) assert.equal(await step({ index: j }), (await auditPath(j, leaves)).length === path.length ? "root" : "path", `leaf ${i} of ${size} at ${j}`);
    }
  }
});

// A poll built here whose dispositions point at other records: alice
// changed her mind (her first vote superseded by her second), bob's vote
// was retried twice (the retries duplicates of his first, which stands),
// dave's came late. Each leaf binds its record's disposition.
test("a superseded or duplicate proof pointing at itself, or a duplicate standing on a duplicate, fails at record", async () => {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const keys = { "r-1": b64(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey))) };
  const sign = async msg => b64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, enc.encode(msg))));
  const fields = [
    ["v-alice", "red", "a1", "superseded"], ["v-alice", "blue", "a2", "counted"],
    ["v-bob", "red", "b1", "counted"], ["v-bob", "red", "b1", "duplicate"], ["v-bob", "red", "b1", "duplicate"],
    ["v-dave", "blue", "d1", "late"],
  ].map(([voter, option, idem, disposition], i) => ({ voter, option, idem, disposition, seq: i + 1, wall: 1796040000000 + 1000 * i }));
  const [ALICE_FIRST, ALICE_LAST, BOB, BOB_RETRY, BOB_RETRY2, DAVE] = fields.keys();
  const recs = fields.map(f => record({ poll: "mind", replica: "r-1", seq: f.seq, wall: f.wall, logical: 0, voter: f.voter, option: f.option, idem: f.idem }));
  const hashes = await Promise.all(recs.map(r => sha(r)));
  const leaves = hashes.map((h, i) => leafOf(h, fields[i].disposition));
  const root = hexOf(await mth(leaves));
  const head = { poll: "mind", size: recs.length, root, digest: "ef".repeat(32), by: "r-1" };
  head.sig = await sign(`tally tree head v1\nmind\n${head.size}\n${root}\n${head.digest}\nr-1\n`);
  const receipts = await Promise.all(fields.map(async (f, i) => {
    const r = { poll: "mind", vote_id: `r-1/${f.seq}`, stamp: `${f.wall}.0`, leaf: hexOf(hashes[i]) };
    r.sig = await sign(`tally receipt v1\nmind\n${r.vote_id}\n${r.stamp}\n${r.leaf}\n`);
    return r;
  }));
  // proof is record i's proof, said to be of disposition (its own by default).
  const proof = async (i, disposition = fields[i].disposition) => ({
    leaf: hexOf(hashes[i]), index: i, path: (await auditPath(i, leaves)).map(hexOf), record: b64(recs[i]), disposition,
    vote: { vote_id: receipts[i].vote_id, voter: fields[i].voter, option: fields[i].option, stamp: receipts[i].stamp },
  });
  const headed = async (i, disposition, counted) => ({ ...await proof(i, disposition), ...(counted ? { counted } : {}), tree_head: head });
  const check = async (i, p) => {
    const r = await verifyReceipt(receipts[i], { keys, proof: JSON.parse(JSON.stringify(p)) });
    return [verdict(r), r.message];
  };
  const want = async (i, p, expected, what) => {
    const [got, message] = await check(i, p);
    assert.equal(got, expected, `${what}: ${message ?? ""}`);
  };

  // The honest proofs.
  await want(ALICE_FIRST, await headed(ALICE_FIRST, "superseded", await proof(ALICE_LAST)), "superseded", "alice's first");
  await want(ALICE_LAST, await headed(ALICE_LAST), "counted", "alice's last");
  await want(BOB, await headed(BOB), "counted", "bob's");
  await want(BOB_RETRY, await headed(BOB_RETRY, "duplicate", await proof(BOB)), "duplicate", "bob's retry");
  await want(BOB_RETRY2, await headed(BOB_RETRY2, "duplicate", await proof(BOB)), "duplicate", "bob's second retry");
  await want(BOB_RETRY, await headed(BOB_RETRY, "duplicate"), "duplicate", "bob's retry, its standing copy not shown");
  await want(DAVE, await headed(DAVE), "late", "dave's");
  const ok = await verifyReceipt(receipts[ALICE_FIRST], { keys, proof: await headed(ALICE_FIRST, "superseded", await proof(ALICE_LAST)) });
  assert.deepEqual(ok.counted, { vote_id: "r-1/2", voter: "v-alice", option: "blue", stamp: receipts[ALICE_LAST].stamp, disposition: "counted" });

  // A superseded or duplicate proof whose counted one is the record itself: the same leaf, or the same index.
  for (const [i, d] of [[ALICE_FIRST, "superseded"], [BOB_RETRY, "duplicate"]]) {
    for (const as of ["counted", "superseded", "duplicate", "late"]) {
      await want(i, await headed(i, d, await proof(i, as)), "error:record", `${d} ${i} pointing at itself as ${as}`);
    }
    const other = i === ALICE_FIRST ? ALICE_LAST : BOB;
    await want(i, await headed(i, d, { ...await proof(other), index: i }), "error:record", `${d} ${i} pointing at its own index`);
    await want(i, await headed(i, d, { ...await proof(other), leaf: hexOf(hashes[i]) }), "error:record", `${d} ${i} pointing at its own leaf`);
  }
  // A duplicate standing on a duplicate (a valid proof of that one): no copy of the key stands.
  await want(BOB_RETRY2, await headed(BOB_RETRY2, "duplicate", await proof(BOB_RETRY)), "error:record", "a duplicate on a duplicate");
  await want(BOB_RETRY, await headed(BOB_RETRY, "duplicate", await proof(BOB_RETRY2)), "error:record", "a duplicate on a later duplicate");
  // ... said to be counted: the leaf binds its disposition.
  await want(BOB_RETRY2, await headed(BOB_RETRY2, "duplicate", await proof(BOB_RETRY, "counted")), "error:root", "a duplicate on a duplicate said counted");
  // A superseded one on a record that does not count.
  await want(ALICE_FIRST, await headed(ALICE_FIRST, "superseded", await proof(BOB)), "error:record", "superseded by another voter's");

  // Dispositions forged: the leaf says otherwise, so the path leads to another root.
  await want(ALICE_FIRST, await headed(ALICE_FIRST, "counted"), "error:root", "superseded forged as counted");
  await want(DAVE, await headed(DAVE, "counted"), "error:root", "late forged as counted");
  await want(BOB_RETRY, await headed(BOB_RETRY, "counted"), "error:root", "duplicate forged as counted");
  await want(BOB, await headed(BOB, "filtered"), "error:root", "counted forged as filtered");
  await want(ALICE_FIRST, await headed(ALICE_FIRST, "superseded", await proof(ALICE_LAST, "late")), "error:root", "the counted one's disposition edited");
  await want(ALICE_LAST, await headed(ALICE_LAST, "superseded", await proof(ALICE_FIRST, "counted")), "error:root", "the change of mind reversed");
  // A word that is none, outer or nested.
  for (const word of ["won", "Counted", "", "constructor", "__proto__"]) {
    await want(BOB, await headed(BOB, word), "error:record", `disposition ${JSON.stringify(word)}`);
    await want(ALICE_FIRST, await headed(ALICE_FIRST, "superseded", await proof(ALICE_LAST, word)), "error:record", `counted disposition ${JSON.stringify(word)}`);
  }
});

test("a one-record poll: its proof's path is null in Go's JSON, and proves", async () => {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const keys = { keys: [{ replica: "r-1", public_key: b64(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey))) }] };
  const sign = async msg => b64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, enc.encode(msg))));
  const rec = record({ poll: "one", replica: "r-1", seq: 1, wall: 1796040000000, logical: 3, voter: "v", option: "yes", idem: "k" });
  const hash = await sha(rec);
  const receipt = { poll: "one", vote_id: "r-1/1", stamp: "1796040000000.3", leaf: hexOf(hash) };
  receipt.sig = await sign(`tally receipt v1\none\nr-1/1\n${receipt.stamp}\n${receipt.leaf}\n`);
  for (const disposition of ["counted", "late", "filtered"]) {
    const root = hexOf(await sha([0], hash, [CODE[disposition]])); // MTH of one leaf
    const head = { poll: "one", size: 1, root, digest: "01".repeat(32), by: "r-1" };
    head.sig = await sign(`tally tree head v1\none\n1\n${root}\n${head.digest}\nr-1\n`);
    // As Go's encoding/json writes it: a nil slice is null.
    const text = `{"leaf":"${receipt.leaf}","index":0,"path":null,"record":"${b64(rec)}",` +
      `"vote":{"vote_id":"r-1/1","voter":"v","option":"yes","stamp":"${receipt.stamp}"},"disposition":"${disposition}",` +
      `"tree_head":${JSON.stringify(head)}}`;
    const got = await verifyReceipt(receipt, { keys, proof: JSON.parse(text) });
    assert.equal(verdict(got), disposition, got.message);
    assert.equal(got.size, 1);
    assert.equal(got.root, root);
    assert.equal(verdict(await verifyReceipt(receipt, { keys, proof: { ...JSON.parse(text), path: [] } })), disposition);
    // Fetched from a node, too.
    const s = server({ "/v1/cluster/keys": [200, keys], [proofPath("one", receipt.leaf)]: [200, text], "/v1/polls/one/result": [200, resultOf(head)] });
    assert.equal(verdict(await verifyReceipt(receipt, { baseUrl: "http://node.test", fetch: s.f })), disposition);
    // A hash too many, or another disposition, does not prove.
    assert.equal((await verifyReceipt(receipt, { keys, proof: { ...JSON.parse(text), path: [root] } })).step, "path");
    const other = disposition === "counted" ? "late" : "counted";
    assert.equal((await verifyReceipt(receipt, { keys, proof: { ...JSON.parse(text), disposition: other } })).step, "root");
    // The old leaf, the record's hash alone, is not this tree's.
    const bare = { ...head, root: hexOf(await sha([0], hash)) };
    bare.sig = await sign(`tally tree head v1\none\n1\n${bare.root}\n${bare.digest}\nr-1\n`);
    assert.equal((await verifyReceipt(receipt, { keys, proof: { ...JSON.parse(text), tree_head: bare } })).step, "root");
  }
});

test("a record that does not decode as its hash's signer said fails at record", async () => {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const keys = { "r-1": b64(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey))) };
  const sign = async msg => b64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, enc.encode(msg))));
  const good = { poll: "p", replica: "r-1", seq: 1, wall: 1796040000000, logical: 0, voter: "v", option: "o", idem: "k" };
  const bad = {
    "version 2": cat([2], record(good).subarray(1)),
    "cut short": record(good).subarray(0, 20),
    "seq not in its shortest form": cat([1], str("p"), str("r-1"), [0x81, 0x00], record(good).subarray(1 + 2 + 4 + 1)),
    "voter with a control character": record({ ...good, voter: "v\u0007" }),
    "voter not UTF-8": cat([1], str("p"), str("r-1"), uvarint(1), uvarint(good.wall), uvarint(0), [2, 0xc3, 0x28], str("o"), str("k")),
    "an empty option": record({ ...good, option: "" }),
    "wall 0": record({ ...good, wall: 0 }),
    "logical over 32 bits": record({ ...good, logical: 2 ** 32 }),
    "a length past the end": cat([1], str("p"), str("r-1"), uvarint(1), uvarint(good.wall), uvarint(0), [0x7f, 0x61]),
  };
  for (const [name, rec] of Object.entries(bad)) {
    const leaf = hexOf(await sha(rec));
    const receipt = { poll: "p", vote_id: "r-1/1", stamp: `${good.wall}.0`, leaf };
    receipt.sig = await sign(`tally receipt v1\np\nr-1/1\n${receipt.stamp}\n${leaf}\n`);
    const root = hexOf(await sha([0], leafOf(await sha(rec), "counted")));
    const head = { poll: "p", size: 1, root, digest: "cd".repeat(32), by: "r-1" };
    head.sig = await sign(`tally tree head v1\np\n1\n${root}\n${head.digest}\nr-1\n`);
    const proof = { leaf, index: 0, path: [], record: b64(rec), disposition: "counted", tree_head: head,
      vote: { vote_id: "r-1/1", voter: "v", option: "o", stamp: receipt.stamp } };
    const got = await verifyReceipt(receipt, { keys, proof });
    assert.equal(verdict(got), "error:record", `${name}: ${got.message}`);
  }
});

test("the client keeps each poll's receipts from its vote answers, newest last, bounded, in storage too", async () => {
  const mem = new Map();
  const storage = { getItem: k => mem.get(k) ?? null, setItem: (k, v) => mem.set(k, String(v)), removeItem: k => mem.delete(k) };
  let n = 0;
  const receiptOf = (poll, i) => ({ ...byName.counted.receipt, poll, stamp: `${1796040000000 + i}.0`, leaf: i.toString(16).padStart(64, "0") });
  const fetch = async (url, opts) => {
    const poll = decodeURIComponent(url.split("/")[5]);
    const body = JSON.parse(opts.body);
    const results = (body.votes ?? [body]).map(v => ({ idem: v.idem, status: "accepted", vote_id: `ap-1/${++n}`,
      stamp: `${1796040000000 + n}.0`, receipt: receiptOf(poll, n) }));
    return new Response(JSON.stringify({ results, server_time: Date.now() }), { status: 200 });
  };
  const client = new Tally({ url: "http://node.test", fetch, storage });
  const res = await client.vote("p", { option: "a", voter: "v", idem: "k1" });
  assert.deepEqual(res.results[0].receipt, receiptOf("p", 1), "the answer's receipt passes through");
  assert.deepEqual(client.receipts("p"), [receiptOf("p", 1)]);
  for (let i = 0; i < 7; i++) await client.vote("p", { option: "b", voter: "v", idem: `k${i + 2}` });
  await client.vote("q", [{ option: "a", voter: "v", idem: "q1" }, { option: "b", voter: "v", idem: "q2" }]);
  const kept = client.receipts("p");
  assert.equal(kept.length, 5, "the newest five of a poll");
  assert.deepEqual(kept.map(r => r.stamp), [4, 5, 6, 7, 8].map(i => `${1796040000000 + i}.0`));
  assert.equal(client.receipts("q").length, 2);
  assert.deepEqual(client.receipts("none"), []);
  // Another client on the same storage (a reload) reads them.
  const again = new Tally({ url: "http://node.test", fetch, storage });
  assert.deepEqual(again.receipts("p"), kept);
  assert.deepEqual(JSON.parse(mem.get("tally.receipts.p")), kept);
  // A damaged entry is no receipts, not an error; a duplicate's older receipt does not displace the newest.
  storage.setItem("tally.receipts.q", "{not json");
  assert.deepEqual(again.receipts("q"), []);
  again.keepReceipts("p", [{ receipt: kept[4] }, { receipt: { poll: "other" } }, { receipt: "x" }, null]);
  assert.deepEqual(again.receipts("p"), kept);
  // Polls past the bound lose theirs, the oldest first.
  for (let i = 0; i < 101; i++) again.keepReceipts(`poll-${i}`, [{ receipt: receiptOf(`poll-${i}`, 1000 + i) }]);
  assert.equal(mem.has("tally.receipts.p"), false);
  assert.equal(again.receipts("poll-100").length, 1);
  assert.ok([...mem.keys()].filter(k => k.startsWith("tally.receipts.")).length <= 100);
});
