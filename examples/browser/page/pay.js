"use strict";
// One payment is one intention: one key, made when the user starts it and
// sent with every attempt, until an answer comes. The key and the body are
// kept in sessionStorage, so that a reload while the page retries resumes
// the same payment, under the same key, instead of paying again. What is
// retried follows docs/client.md.

const api = document.querySelector('meta[name="api"]').content;
const pending = "payment"; // the sessionStorage item of the open intention
const maxAttempts = 5; // per run of send; the key stays for the next
// idemhttp's problems that the same request may get past; its other
// problems are final. A server with WithProblemTypeBase names its own base.
const problemBase = "https://github.com/idemgo/idem/blob/main/docs/http.md#";
const retriedProblems = new Set(["in-flight", "conflict", "unfinished", "outcome-unknown"]);

const $ = (id) => document.getElementById(id);

function show(state, attempt, text) {
  $("status").dataset.state = state;
  $("status").dataset.attempt = String(attempt);
  $("status").textContent = text;
}

// retryable tells whether answer, {resp, text}, is worth another attempt.
function retryable({ resp, text }) {
  if ((resp.headers.get("Content-Type") || "").startsWith("application/problem+json")) {
    let type = "";
    try { type = String(JSON.parse(text).type || ""); } catch { /* not a problem of idemhttp's */ }
    if (type.startsWith(problemBase) && type.length > problemBase.length) {
      return retriedProblems.has(type.slice(problemBase.length));
    }
  }
  return [429, 502, 503, 504].includes(resp.status);
}

// retryAfter returns the wait, in ms, that the answer's Retry-After asks
// for, in seconds or as a date; the API must expose the header for the
// page to read it.
function retryAfter(answer) {
  const v = (answer && answer.resp.headers.get("Retry-After") || "").trim();
  if (/^\d+$/.test(v)) {
    return Number(v) <= 86400 ? Number(v) * 1000 : 0;
  }
  const t = Date.parse(v);
  return Number.isNaN(t) ? 0 : Math.max(t - Date.now(), 0);
}

// backoff: a random wait up to 100 ms doubled per retry, at most 10 s.
const backoff = (n) => Math.random() * Math.min(10000, 100 * 2 ** (n - 1));

async function send(p) {
  $("pay").disabled = true;
  $("payee").readOnly = $("amount").readOnly = true; // the open payment's
  $("answer").hidden = true;
  $("key").textContent = p.key;
  for (let run = 1; ; run++) {
    p.attempts++;
    sessionStorage.setItem(pending, JSON.stringify(p));
    show("sending", p.attempts, `Sending, attempt ${p.attempts}…`);
    let answer = null;
    try {
      const resp = await fetch(api + "/payments", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": p.key },
        body: p.body,
      });
      answer = { resp, text: await resp.text() };
    } catch {
      // No answer: the payment may have been made or not. The same key
      // makes the retry safe: it is replayed if it was, and runs if not.
    }
    if (answer && !retryable(answer)) {
      return finish(p, answer);
    }
    if (run >= maxAttempts) {
      show("stopped", p.attempts, "No answer yet. Pay again to retry this payment; it will not be paid twice.");
      $("pay").disabled = false;
      return;
    }
    const wait = Math.max(retryAfter(answer), backoff(run));
    $("status").dataset.wait = String(Math.round(wait));
    show("waiting", p.attempts, `No answer yet; retrying in ${(wait / 1000).toFixed(1)} s…`);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

function finish(p, { resp, text }) {
  sessionStorage.removeItem(pending); // answered: the next payment is another intention
  const replayed = resp.headers.get("Idempotent-Replayed") === "true";
  $("answer").dataset.status = String(resp.status);
  $("answer").dataset.replayed = String(replayed);
  $("answer-status").textContent = `${resp.status} ${resp.statusText}`;
  $("answer-replayed").textContent = replayed ? "a replay of the first answer" : "the first answer";
  $("answer-body").textContent = text;
  $("answer").hidden = false;
  show("done", p.attempts, `Answered after ${p.attempts} attempt(s).`);
  $("pay").disabled = false;
  $("payee").readOnly = $("amount").readOnly = false;
}

$("form").addEventListener("submit", (event) => {
  event.preventDefault();
  const open = JSON.parse(sessionStorage.getItem(pending) || "null");
  if (open) {
    return send(open); // the same payment again, after a stop
  }
  const body = JSON.stringify({ payee: $("payee").value, amount_cents: Number($("amount").value) });
  send({ key: crypto.randomUUID(), body, attempts: 0 });
});

// A payment that was still open when the page was left: resume it.
const open = JSON.parse(sessionStorage.getItem(pending) || "null");
if (open) {
  const { payee, amount_cents: amount } = JSON.parse(open.body);
  $("payee").value = payee;
  $("amount").value = String(amount);
  send(open);
}
