// The page is thin: the server (dabjax/cli/serve.py) decides everything (legal moves, scores, turns, the
// result) and draws the board as SVG; this script shows its answers and posts the user's clicks.
"use strict";

const AGENT_PAUSE_MS = 350; // between agent moves, so each one is seen
const $ = (id) => document.getElementById(id);
let shownVersion = 0; // the server counts its changes: an answer older than the one shown is dropped
let agentBusy = false; // an agent move is scheduled or on its way: never ask for two at once
let clockBusy = false; // a clock change is on its way: the select waits for its answer
const CLOCK_HELP = "The agent's wall time for each move (the spec it was started with, SPEC@Ns). "
  + "A new clock compiles first: that can take tens of seconds.";

async function call(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  return response.json();
}

function text(id, value) {
  $(id).textContent = value;
}

function showAnalysis(view) {
  const list = $("analysis");
  list.replaceChildren();
  const analysis = view.analysis;
  if (!$("show-analysis").checked) {
    text("analysis-text", "Hidden.");
  } else if (!analysis) {
    text("analysis-text", view.searches ? "Shown after the agent's next move."
      : `${view.agent} does not search: only its moves are shown.`);
  } else {
    text("analysis-text", analysis.text);
    for (const move of analysis.moves) {
      const item = document.createElement("li");
      const played = move.line === analysis.played ? " (played)" : "";
      item.textContent = `${move.name}: ${(100 * move.share).toFixed(0)}%${played}`;
      list.append(item);
    }
  }
}

let analysisAsked = 0; // the version whose board analysis was asked for (one request per position)

function showBoardAnalysis(view) {
  const list = $("board-analysis");
  list.replaceChildren();
  const board = view.board_analysis;
  document.body.dataset.boardAnalysis = board ? board.kind : "";
  if (!$("analyse-board").checked) {
    text("board-analysis-text", "Analysis board off: tick it to see every line's exact value.");
    return;
  }
  if (!board) {
    text("board-analysis-text", view.game_over ? "The game is over." : "Analysing...");
    if (!view.game_over && view.to_move === "human" && analysisAsked < view.version) {
      analysisAsked = view.version;
      request("/api/analyse", {seconds: Number($("analysis-seconds").value) || 2});
    }
    return;
  }
  text("board-analysis-text", board.text);
  for (const move of board.moves) {
    const item = document.createElement("li");
    if (board.kind === "exact") {
      item.textContent = `${move.name}: ${move.margin > 0 ? "+" : ""}${move.margin}`;
      if (move.best) item.className = "best";
    } else {
      item.textContent = `${move.name}: ${(100 * move.share).toFixed(0)}%`;
    }
    list.append(item);
  }
}

// The clock select: the agent's clock now ("as started": the spec the server was started with), disabled with
// the reason when the started agent takes no clock.
function showClock(view) {
  const select = $("clock");
  const why = view.clock_refusal || CLOCK_HELP;
  select.title = why;
  $("clock-label").title = why; // a disabled select shows no tooltip of its own in some browsers
  $("clock-label").classList.toggle("disabled", Boolean(view.clock_refusal));
  select.disabled = clockBusy || Boolean(view.clock_refusal || view.preparing_clock);
  if (clockBusy) return;
  const value = view.agent === view.started_agent ? "" : String(view.clock_seconds);
  if (![...select.options].some((option) => option.value === value)) {
    select.add(new Option(`${value} s`, value)); // a clock set through the API
  }
  select.value = value;
}

function show(view) {
  if (view.version === undefined || view.version < shownVersion) return;
  shownVersion = view.version;
  for (const [index, player] of view.players.entries()) {
    text(`name-${index}`, player.human ? `${player.name} (you)` : player.name);
    text(`score-${index}`, String(player.score));
    $(`player-${index}`).style.color = player.colour;
    $(`player-${index}`).classList.toggle("to-move", !view.game_over && view.current_player === index);
  }
  text("subtitle", `${view.board} against ${view.agent}`);
  text("status", view.status);
  $("status").className = view.game_over ? `over ${view.result}` : "";
  text("message", view.error || view.message || "");
  $("message").className = view.error ? "error" : "";
  $("board").innerHTML = view.svg;
  $("board").classList.toggle("locked", view.to_move !== "human");
  $("new-agent").textContent = `New game: ${view.agent} first`;
  const moves = $("moves");
  moves.replaceChildren(...view.move_names.map((name, i) => {
    const item = document.createElement("li");
    item.textContent = `${name} (${"AB"[view.drawers[i]]})`;
    return item;
  }));
  moves.dataset.moves = view.moves.join(",");
  text("record", view.record);
  $("setup").checked = view.setup;
  document.body.dataset.setup = String(view.setup);
  showAnalysis(view);
  showBoardAnalysis(view);
  document.body.dataset.toMove = view.to_move || "";
  document.body.dataset.gameOver = String(view.game_over);
  document.body.dataset.moves = String(view.moves.length);
  document.body.dataset.version = String(view.version);
  if (view.to_move === "agent" && !view.error) {
    text("status", `${view.agent} is thinking...`);
  }
  showClock(view);
  if (view.preparing_clock) {
    text("status", `${$("status").textContent} Preparing the clock of ${view.preparing_clock} `
      + "(compiling: this can take tens of seconds)...");
  }
  if (view.to_move === "agent" && !agentBusy) {
    agentBusy = true;
    setTimeout(agentTurn, AGENT_PAUSE_MS);
  }
}

// The server's answer, or null (with a message) when it did not answer.
async function send(path, body) {
  try {
    return await call(path, body);
  } catch (error) {
    text("message", `The server did not answer (${error}). Is dabjax serve (or evaluate.py serve) still running?`);
    $("message").className = "error";
    return null;
  }
}

// Clicks are never held back here: the server takes requests one at a time and refuses what is illegal.
async function request(path, body) {
  const view = await send(path, body);
  if (view) show(view);
}

async function agentTurn() {
  // Still the agent's turn? (A new game may have begun meanwhile.)
  const view = document.body.dataset.toMove === "agent"
    ? await send("/api/agent", {analyse: $("show-analysis").checked}) : null;
  agentBusy = false;
  if (view) show(view);
}

$("board").addEventListener("click", (event) => {
  const target = event.target.closest(".hit");
  if (!target) return;
  request("/api/move", {line: Number(target.dataset.line)});
});
$("new-human").addEventListener("click", () => request("/api/new", {human_first: true}));
$("new-agent").addEventListener("click", () => request("/api/new", {human_first: false}));
$("show-analysis").addEventListener("change", () => request("/api/state"));
$("undo").addEventListener("click", () => request("/api/undo", {}));
$("setup").addEventListener("change", () => request("/api/setup", {on: $("setup").checked}));
$("analyse-board").addEventListener("change", () => { analysisAsked = 0; request("/api/state"); });
$("analysis-seconds").addEventListener("change", () => {
  if ($("analyse-board").checked) request("/api/analyse", {seconds: Number($("analysis-seconds").value) || 2});
});
$("clock").addEventListener("change", async () => {
  const value = $("clock").value;
  clockBusy = true;
  $("clock").disabled = true;
  text("status", "Preparing the clock (compiling: this can take tens of seconds)...");
  const view = await send("/api/clock", {seconds: value === "" ? null : Number(value)});
  clockBusy = false;
  if (view) {
    show(view);
    showClock(view); // also when show() dropped the answer as older than the page
  }
});
$("replay").addEventListener("click", () => request("/api/replay", {moves: $("replay-input").value}));
$("copy").addEventListener("click", async () => {
  const record = $("record").textContent;
  try {
    await navigator.clipboard.writeText(record);
    text("message", "Copied the moves.");
  } catch (error) {
    text("message", `Copy failed (${error}): select the moves above instead.`);
  }
});
request("/api/state");
