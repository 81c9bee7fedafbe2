// The mnemo inspector: a page over the JSON API under /v1, with the key the person types in.
// Everything shown is built with textContent, never parsed as HTML: memories hold what users
// and models wrote.
"use strict";

const PAGE = 50;
const state = { key: null, user: null, admin: false, offset: 0, current: null };
const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name === "onclick") node.addEventListener("click", value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Calls the API; throws an Error with the server's message on a non-2xx answer. */
async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + state.key };
  if (state.admin && state.user) headers["X-Mnemo-User"] = state.user;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    const error = new Error((data && data.error && data.error.message) || response.status + " " + response.statusText);
    error.status = response.status;
    throw error;
  }
  return data;
}

function say(message, isError) {
  const status = $("status");
  status.textContent = message || "";
  status.className = isError ? "error" : "";
}

const when = (time) => time ? time.replace("T", " ").replace(/:\d\d(\.\d+)?Z$/, " UTC") : "";
/** A score for people: fixed decimals, or two significant digits for the tiny ones (BM25 on a
 * small store). */
const fixed = (value, digits = 3) => {
  if (typeof value !== "number") return "";
  return value === 0 || Math.abs(value) >= 10 ** -digits ? value.toFixed(digits) : value.toPrecision(2);
};
const kindTag = (kind) => el("span", { class: "kind " + kind }, kind === "episode" ? "turn" : kind);

// ---- signing in -------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  $("sign-in-error").textContent = "";
  state.key = $("key").value.trim();
  state.user = $("act-for").value.trim() || null;
  state.admin = false;
  try {
    const users = await api("GET", "/v1/users");
    state.admin = true;
    const list = $("users");
    list.replaceChildren(...users.users.map((user) => el("option", { value: user.user_id }, user.memories + " memories")));
    if (!state.user) {
      $("sign-in-error").textContent = "This is an admin key: name the user whose memory to open (" + users.users.length + " users have memories).";
      return;
    }
  } catch (error) {
    if (error.status === 401) { $("sign-in-error").textContent = error.message; return; }
    if (error.status !== 403) { $("sign-in-error").textContent = error.message; return; }
  }
  try {
    const stats = await api("GET", "/v1/stats");
    state.user = stats.user_id;
    sessionStorage.setItem("mnemo-key", state.key);
    sessionStorage.setItem("mnemo-user", state.admin ? state.user : "");
    showStats(stats);
  } catch (error) {
    $("sign-in-error").textContent = error.message;
    return;
  }
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("who").hidden = false;
  $("who").textContent = (state.admin ? "admin, as " : "") + state.user;
  $("sign-out").hidden = false;
  await Promise.all([loadEntities(), loadMemories(true)]);
  show("memories");
}

function signOut() {
  sessionStorage.removeItem("mnemo-key");
  sessionStorage.removeItem("mnemo-user");
  location.reload();
}

function showStats(stats) {
  const faded = stats.faded_facts ? ` (${stats.faded_facts} faded)` : "";
  $("stats").textContent = `${stats.facts} facts${faded} · ${stats.episodes} turns · ${stats.reflections} reflections · ${stats.entities} entities · ${stats.pending_index} waiting for a vector`;
}

// ---- panels -----------------------------------------------------------------------------

function show(panel) {
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.dataset.panel === panel);
    $("panel-" + tab.dataset.panel).hidden = tab.dataset.panel !== panel;
  }
  if (panel === "people") loadPeople();
  if (panel === "jobs") loadJobs();
}

// ---- memories ---------------------------------------------------------------------------

function memoryQuery(offset) {
  const query = new URLSearchParams({ limit: PAGE, offset });
  const kind = $("filter-kind").value;
  if (kind) query.set("kind", kind);
  if ($("filter-since").value) query.set("since", $("filter-since").value + "T00:00:00Z");
  if ($("filter-until").value) {
    const until = new Date($("filter-until").value + "T00:00:00Z");
    until.setUTCDate(until.getUTCDate() + 1);
    query.set("until", until.toISOString().replace(".000Z", "Z"));
  }
  if ($("filter-entity").value) query.set("entity_id", $("filter-entity").value);
  if ($("filter-inactive").checked) query.set("include_inactive", "true");
  if ($("filter-quarantined").checked) query.set("quarantined", "true");
  return query;
}

async function loadMemories(fresh) {
  if (fresh) state.offset = 0;
  try {
    const page = await api("GET", "/v1/memories?" + memoryQuery(state.offset));
    const rows = page.memories.map((memory) => el("tr", {
      class: "memory" + (memory.active ? "" : " inactive"), "data-id": memory.id,
      onclick: () => openMemory(memory.id),
    },
    el("td", { class: "when" }, when(memory.event_time)),
    el("td", {}, kindTag(memory.kind)),
    el("td", {}, held(memory), memory.content),
    el("td", {}, fixed(memory.confidence, 2))));
    if (fresh) $("memory-rows").replaceChildren(...rows);
    else $("memory-rows").append(...rows);
    state.offset = page.next_offset || 0;
    $("more").hidden = !page.next_offset;
    say(fresh && rows.length === 0 ? "No memories match." : "");
  } catch (error) {
    say(error.message, true);
  }
}

// ---- search -----------------------------------------------------------------------------

async function search(event) {
  event.preventDefault();
  const query = $("search-query").value.trim();
  if (!query) return;
  say("Searching…");
  try {
    const results = await api("POST", "/v1/search", { query, mode: $("search-mode").value, limit: 20 });
    $("hits").replaceChildren(...results.hits.map((hit) => {
      const why = hit.why;
      return el("li", { class: "hit", "data-id": hit.memory.id, onclick: () => openMemory(hit.memory.id) },
        el("div", {}, el("span", { class: "score" }, fixed(hit.score)), kindTag(hit.memory.kind), " ",
          el("span", { class: "when" }, when(hit.memory.event_time))),
        el("div", { class: "content" }, held(hit.memory), hit.memory.content),
        el("div", { class: "why" },
          why.lists.map((list) => el("span", { class: "list", title: "rank in that list, and its own score" },
            `${list.list} #${list.rank} · ${fixed(list.score)}`)),
          el("span", { title: "how the lists were fused" }, `${why.fusion} fused ${fixed(why.fused)}`),
          why.speaker !== 1 ? el("span", { title: "a turn spoken by the person the query names" }, `× speaker ${fixed(why.speaker)}`) : null,
          why.period !== 1 ? el("span", { title: "said in the period the query names, or the week after" }, `× period ${fixed(why.period)}`) : null,
          el("span", { title: "what neighbouring turns of its session added" }, `+ neighbours ${fixed(why.neighbours)}`),
          why.session ? el("span", { title: "what the best other matches of its session added" }, `+ session ${fixed(why.session)}`) : null,
          el("span", { title: "min(1, 0.5 + confidence)" }, `× confidence ${fixed(why.confidence_weight)}`)));
    }));
    say(results.hits.length ? `${results.hits.length} hits, best first.` : "Nothing found.");
  } catch (error) {
    say(error.message, true);
  }
}

/** The quarantine badge of a memory the screen holds back from the agent's context, or null. */
function held(memory) {
  const quarantine = memory.quarantine;
  return quarantine ? el("span", { class: "quarantine", title: `held back from the agent's context: ${quarantine.evidence}` },
    `quarantined: ${quarantine.reason}`, " ") : null;
}

// ---- one memory -------------------------------------------------------------------------

function link(memory) {
  return el("li", {}, kindTag(memory.kind), " ", el("a", { onclick: () => openMemory(memory.id), "data-id": memory.id }, memory.content),
    " ", el("span", { class: "when" }, when(memory.event_time)), memory.active ? null : el("span", { class: "bad" }, " (inactive)"));
}

function chain(title, memories, empty) {
  return [el("h3", {}, title), memories.length ? el("ul", { class: "chain" }, memories.map(link)) : el("p", { class: "when" }, empty)];
}

async function openMemory(id) {
  try {
    const provenance = await api("GET", `/v1/memories/${encodeURIComponent(id)}/provenance`);
    state.current = provenance.memory;
    const memory = provenance.memory;
    const made = provenance.made_by;
    const run = made.job_run;
    const fields = [
      ["Id", memory.id], ["Kind", memory.kind], ["Said or learnt", when(memory.event_time)],
      ["Stored", when(memory.created_at)], ["Status", memory.active ? (memory.faded_at ? "faded out of the context" : "active") : "inactive"],
      ["Quarantined", memory.quarantine ? `${memory.quarantine.reason} (${memory.quarantine.evidence}): never put into the agent's context until released` : null],
      ["Confidence", fixed(memory.confidence, 3)], ["Recalled", `${memory.access_count} time${memory.access_count === 1 ? "" : "s"}` + (memory.last_accessed ? `, last ${when(memory.last_accessed)}` : "")],
      ["Session", memory.session_id], ["Chat", memory.chat_id], ["Said by", memory.source_role],
      ["Type", memory.memory_type], ["Expires", when(memory.expires_at)], ["Tags", memory.tags.join(", ")],
    ].filter(([, value]) => value);
    $("detail-body").replaceChildren(
      el("p", { class: "content", id: "detail-content" }, memory.content),
      el("dl", { class: "fields" }, fields.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)])),
      el("h3", {}, "Made by"),
      el("p", { id: "made-by" }, `${made.how}` + (made.session_id ? ` in session ${made.session_id}` : "") + (made.provider ? ` via ${made.provider}` : "") + `, ${when(made.at)}`,
        run ? el("span", {}, ` — job run ${run.name} started ${when(run.at)}: `, el("span", { class: run.ok ? "ok" : "bad" }, run.report)) : null),
      ...chain("Sources", provenance.sources, "None: it was said or told directly."),
      ...chain("Replaced", provenance.replaced, "No earlier version."),
      ...chain("Replaced by", provenance.replaced_by, "Nothing: this is the current version."),
    );
    const fact = memory.kind === "fact" && memory.active;
    $("release").hidden = !memory.quarantine;
    $("confirm-fact").hidden = !fact;
    $("correct-fact").hidden = !fact;
    $("forget").hidden = false;
    $("detail").hidden = false;
  } catch (error) {
    say(error.message, true);
  }
}

/** Asks in a dialog; resolves to the text typed (or true) on yes, null on cancel. */
function ask(question, withText, initial) {
  return new Promise((resolve) => {
    const dialog = $("ask");
    $("ask-text").textContent = question;
    $("ask-input").hidden = !withText;
    $("ask-input").value = initial || "";
    dialog.returnValue = "";
    dialog.addEventListener("close", () => {
      if (dialog.returnValue !== "yes") resolve(null);
      else resolve(withText ? $("ask-input").value.trim() : true);
    }, { once: true });
    dialog.showModal();
  });
}

async function forget() {
  const memory = state.current;
  if (!memory || !(await ask(`Forget this memory for good? "${memory.content}", its copies in the indexes, and what was derived from it (facts drawn only from it, reflections built on it) are deleted; this cannot be undone.`))) return;
  try {
    const done = await api("DELETE", `/v1/memories/${encodeURIComponent(memory.id)}`);
    const receipt = done.receipt;
    $("detail").hidden = true;
    for (const entry of receipt.removed) {
      for (const node of document.querySelectorAll(`[data-id="${CSS.escape(entry.id)}"]`)) node.remove();
    }
    const removed = receipt.removed.map((entry) => `${entry.kind} ${entry.id} (${entry.why})`).join(", ");
    const changed = receipt.changed.length ? `; changed: ${receipt.changed.map((entry) => `${entry.kind} ${entry.id}`).join(", ")}` : "";
    say(`Forgotten, receipt ${receipt.id}. Removed: ${removed}${changed}.`);
    showStats(await api("GET", "/v1/stats"));
  } catch (error) {
    say(error.message, true);
  }
}

async function correct() {
  const memory = state.current;
  const text = memory && await ask("What is true instead? The old fact stays in the history as replaced.", true, memory.content);
  if (!text) return;
  try {
    const changed = await api("POST", `/v1/memories/${encodeURIComponent(memory.id)}/correct`, { content: text });
    say(`Corrected: ${memory.id} is replaced by ${changed.replaced_by}`);
    await loadMemories(true);
    await openMemory(changed.replaced_by);
  } catch (error) {
    say(error.message, true);
  }
}

async function release() {
  const memory = state.current;
  if (!memory || !(await ask(`Release "${memory.content}"? The memory screen held it back (${memory.quarantine.reason}); released, it may be put into the agent's context again.`))) return;
  try {
    await api("POST", `/v1/memories/${encodeURIComponent(memory.id)}/release`);
    say(`Released: ${memory.id}`);
    await openMemory(memory.id);
  } catch (error) {
    say(error.message, true);
  }
}

async function confirmFact() {
  const memory = state.current;
  if (!memory || !(await ask(`Confirm "${memory.content}"? It gets full confidence and never fades.`))) return;
  try {
    await api("POST", `/v1/memories/${encodeURIComponent(memory.id)}/confirm`);
    say(`Confirmed: ${memory.id}`);
    await openMemory(memory.id);
  } catch (error) {
    say(error.message, true);
  }
}

// ---- people, entities and jobs ----------------------------------------------------------

async function loadEntities() {
  try {
    const { entities } = await api("GET", "/v1/entities");
    $("filter-entity").replaceChildren(el("option", { value: "" }, "anyone, anything"),
      ...entities.map((entity) => el("option", { value: entity.id }, `${entity.name} (${entity.type})`)));
    $("entity-rows").replaceChildren(...entities.map((entity) => el("tr", {},
      el("td", {}, el("a", { onclick: () => aboutEntity(entity.id) }, entity.name)),
      el("td", {}, entity.type), el("td", {}, entity.memories))));
  } catch (error) {
    say(error.message, true);
  }
}

function aboutEntity(id) {
  $("filter-entity").value = id;
  show("memories");
  loadMemories(true);
}

async function loadPeople() {
  try {
    const { people } = await api("GET", "/v1/people");
    $("people-rows").replaceChildren(...people.map((person) => el("tr", {},
      el("td", {}, el("a", { onclick: () => aboutEntity(person.id) }, person.name)),
      el("td", {}, person.relation || ""), el("td", {}, person.aliases.join(", ")))));
    await loadEntities();
  } catch (error) {
    say(error.message, true);
  }
}

async function loadJobs() {
  if (!state.admin) {
    $("jobs-note").textContent = "Jobs run for every user at once: their history needs an admin key.";
    return;
  }
  try {
    const [{ jobs }, { runs }] = await Promise.all([api("GET", "/v1/jobs"), api("GET", "/v1/jobs/runs?limit=100")]);
    $("jobs-note").textContent = "The newest runs of every job, by any server on this store. Runs and failures count since this server started.";
    $("job-rows").replaceChildren(...jobs.map((job) => el("tr", {},
      el("td", {}, job.name), el("td", {}, job.extension), el("td", {}, job.cron),
      el("td", {}, job.runs), el("td", { class: job.failures ? "bad" : "" }, job.failures))));
    $("run-rows").replaceChildren(...runs.map((run) => el("tr", { class: "run" },
      el("td", {}, run.name), el("td", { class: "when" }, when(run.at)),
      el("td", {}, ((Date.parse(run.finished_at) - Date.parse(run.at)) / 1000).toFixed(1) + " s"),
      el("td", { class: run.ok ? "ok" : "bad" }, run.ok ? (run.failed_items ? `done, ${run.failed_items} failed` : "done") : "failed"),
      el("td", {}, run.report))));
  } catch (error) {
    say(error.message, true);
  }
}

// ---- wiring -----------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.panel));
  $("filters").addEventListener("submit", (event) => { event.preventDefault(); loadMemories(true); });
  $("more").addEventListener("click", () => loadMemories(false));
  $("search-form").addEventListener("submit", search);
  $("detail-close").addEventListener("click", () => { $("detail").hidden = true; });
  $("forget").addEventListener("click", forget);
  $("correct-fact").addEventListener("click", correct);
  $("confirm-fact").addEventListener("click", confirmFact);
  $("release").addEventListener("click", release);
  const saved = sessionStorage.getItem("mnemo-key");
  if (saved) {
    $("key").value = saved;
    $("act-for").value = sessionStorage.getItem("mnemo-user") || "";
    $("key-form").requestSubmit();
  }
});
