// The live page of `mini-infer serve` (chapter 26a): a chat box that streams /v1/chat/completions, and
// the engine drawn from the frames of /live/events. Plain JavaScript, no build step.
"use strict";

const FREE = -1, CACHED = -2;                      // block owners that are not a sequence (26a)
const STANDARD_USAGE = new Set(["prompt_tokens", "completion_tokens", "total_tokens"]);
const $ = (id) => document.getElementById(id);
const conversation = [];                           // the chat so far: OpenAI messages

// ------------------------------------------------------------------ chat

function seqColour(seqId) {                          // golden-angle hues: neighbours look different
  return `hsl(${(seqId * 137.508) % 360}, 62%, 52%)`;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  div.textContent = text;
  $("messages").append(div);
  div.scrollIntoView({block: "end"});
  return div;
}

function headers() {
  const h = {"content-type": "application/json"};
  const key = $("api-key").value.trim();
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

async function errorText(response) {               // OpenAI's error body, or the status line
  try { return (await response.json()).error.message; } catch { return `HTTP ${response.status}`; }
}

async function modelName() {
  const r = await fetch("/v1/models", {headers: headers()});
  if (!r.ok) throw new Error(await errorText(r));
  return (await r.json()).data[0].id;
}

// Each `data:` line of a server-sent-events body, as it arrives.
async function* sseData(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (line.startsWith("data: ")) yield line.slice(6);
    }
  }
}

// Numeric fields of `usage` beyond OpenAI's three, nested ones as `a.b`.
function extraUsage(usage, prefix = "") {
  const out = [];
  for (const [key, value] of Object.entries(usage || {})) {
    const name = prefix + key;
    if (typeof value === "number" && !STANDARD_USAGE.has(name)) out.push([name, value]);
    else if (value && typeof value === "object") out.push(...extraUsage(value, `${name}.`));
  }
  return out;
}

function numbersLine(m) {
  const fmt = (x, digits) => Number.isFinite(x) ? x.toFixed(digits) : "–";
  const parts = [`TTFT ${fmt(m.ttft, 3)} s`, `${fmt(m.tokensPerS, 1)} tokens/s`,
                 `${m.tokens} tokens`, `finish ${m.finish || "–"}`];
  for (const [k, v] of extraUsage(m.usage)) parts.push(`${k} ${Number.isInteger(v) ? v : v.toFixed(3)}`);
  return parts.join(" · ");
}

async function ask(question) {
  conversation.push({role: "user", content: question});
  addMessage("user", question);
  const answer = addMessage("assistant", "");
  const numbers = document.createElement("div");
  numbers.className = "numbers";
  answer.after(numbers);
  const m = {ttft: NaN, tokensPerS: NaN, tokens: 0, finish: null, usage: null};
  const t0 = performance.now();
  let tFirst = null, tLast = null, chunks = 0;
  try {
    const body = {model: await modelName(), messages: conversation, stream: true,
                  stream_options: {include_usage: true}, max_tokens: Number($("max-tokens").value)};
    const r = await fetch("/v1/chat/completions", {method: "POST", headers: headers(),
                                                   body: JSON.stringify(body)});
    if (!r.ok) throw new Error(await errorText(r));
    for await (const data of sseData(r)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) m.usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        if (choice.delta && choice.delta.content) {
          tLast = performance.now();
          if (tFirst === null) tFirst = tLast;
          chunks += 1;
          answer.textContent += choice.delta.content;
          $("messages").scrollTop = $("messages").scrollHeight;
        }
        if (choice.finish_reason) m.finish = choice.finish_reason;
      }
      m.tokens = m.usage ? m.usage.completion_tokens : chunks;
      m.ttft = tFirst === null ? NaN : (tFirst - t0) / 1000;
      m.tokensPerS = m.tokens > 1 && tLast > tFirst ? (m.tokens - 1) / ((tLast - tFirst) / 1000) : NaN;
      numbers.textContent = numbersLine(m);
    }
    conversation.push({role: "assistant", content: answer.textContent});
    answer.dataset.done = "true";
  } catch (e) {
    conversation.pop();                             // the turn did not happen
    answer.classList.add("error");
    answer.textContent = `error: ${e.message}`;
    answer.dataset.done = "error";
  }
  numbers.textContent = numbersLine(m);
}

$("ask").addEventListener("submit", async (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  $("question").value = "";
  $("send").disabled = true;
  try { await ask(question); } finally { $("send").disabled = false; $("question").focus(); }
});

$("question").addEventListener("keydown", (event) => {   // Enter sends, Shift+Enter is a new line
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("ask").requestSubmit(); }
});

// ------------------------------------------------------------------ the engine

function counters(frame) {
  const s = frame.stats, r = frame.rates;
  const rate = s.prefix_cache_queries ? s.prefix_cache_hits / s.prefix_cache_queries : 0;
  return [["running", s.num_requests_running], ["waiting", frame.num_waiting],
          ["generated tokens/s", r.generation_tokens_per_s.toFixed(1)],
          ["prefill tokens/s", r.prompt_tokens_per_s.toFixed(1)],
          ["KV blocks free", `${s.kv_blocks_free} / ${s.kv_blocks_total}`],
          ["prefix cache hits", `${s.prefix_cache_hits} tokens (${(100 * rate).toFixed(0)}%)`],
          ["preemptions", s.num_preemptions], ["requests finished", s.requests_finished]];
}

function drawCounters(frame, dropped) {
  $("counters").replaceChildren(...[...counters(frame), ["frames dropped", dropped]].map(([k, v]) => {
    const div = document.createElement("div");
    div.innerHTML = "<dt></dt><dd></dd>";
    div.firstChild.textContent = k;
    div.lastChild.textContent = v;
    return div;
  }));
}

function drawSeqs(list, seqs) {
  list.replaceChildren(...seqs.map((q) => {
    const li = document.createElement("li");
    li.innerHTML = '<span class="swatch"></span>';
    li.firstChild.style.background = seqColour(q.seq_id);
    li.append(`seq ${q.seq_id}: ${q.prompt_tokens} prompt` +
              (q.cached_tokens ? ` (${q.cached_tokens} cached)` : "") +
              ` + ${q.output_tokens} out, ${q.blocks} blocks`);
    return li;
  }));
}

// One pool as a grid of cells, one per block; its counts as data-* attributes (read by the test).
function drawPool(figure, pool) {
  const n = pool.owners.length, width = 480;
  const cell = Math.max(2, Math.min(24, Math.floor(Math.sqrt(width * 200 / n))));
  const cols = Math.floor(width / cell), rows = Math.ceil(n / cols);
  const canvas = figure.querySelector("canvas");
  canvas.width = cols * cell;
  canvas.height = rows * cell;
  const ctx = canvas.getContext("2d"), gap = cell > 4 ? 1 : 0;
  const shared = new Set(pool.shared);
  let held = 0, cached = 0;
  pool.owners.forEach((owner, i) => {
    const x = (i % cols) * cell, y = Math.floor(i / cols) * cell;
    if (owner >= 0) held += 1; else if (owner === CACHED) cached += 1;
    ctx.fillStyle = owner === FREE ? "#dde1e7" : owner === CACHED ? "#b9c6e4" : seqColour(owner);
    ctx.fillRect(x, y, cell - gap, cell - gap);
    if (shared.has(i) && cell >= 6) {
      ctx.fillStyle = "#fff";
      ctx.beginPath();
      ctx.arc(x + cell / 2, y + cell / 2, cell / 5, 0, 2 * Math.PI);
      ctx.fill();
    }
  });
  Object.assign(figure.dataset, {held, cached, free: n - held - cached, shared: shared.size});
  figure.querySelector("figcaption").textContent =
    `${pool.group} (${pool.kind}, ${pool.block_size} tokens a block): ${held} held` +
    (shared.size ? ` (${shared.size} shared)` : "") + `, ${cached} cached, ${n - held - cached} free`;
}

function drawPools(pools) {
  const box = $("pools");
  while (box.children.length < pools.length) {
    const figure = document.createElement("figure");
    figure.className = "pool";
    figure.innerHTML = "<canvas></canvas><figcaption></figcaption>";
    box.append(figure);
  }
  pools.forEach((pool, i) => drawPool(box.children[i], pool));
}

let lastFrame = 0, dropped = 0;
function onFrame(frame) {
  if (lastFrame && frame.frame > lastFrame + 1) dropped += frame.frame - lastFrame - 1;
  lastFrame = frame.frame;
  drawCounters(frame, dropped);
  drawSeqs($("running"), frame.running);
  drawSeqs($("waiting"), frame.waiting);
  drawPools(frame.pools);
  document.body.dataset.frame = frame.frame;
}

const events = new EventSource("/live/events");     // reconnects by itself after an error
events.onopen = () => { $("status").textContent = "live"; };
events.onerror = () => { $("status").textContent = "reconnecting…"; };
events.onmessage = (message) => onFrame(JSON.parse(message.data));
