// The page is thin: the server (dabjax/cli/serve.py) decides everything (legal moves, scores, turns, the
// result) and draws the board as SVG; this script shows its answers and posts the user's clicks.
"use strict";

const AGENT_PAUSE_MS = 350; // between agent moves, so each one is seen
const $ = (id) => document.getElementById(id);
let shownVersion = 0; // the server counts its changes: an answer older than the one shown is dropped
let agentBusy = false; // an agent move is scheduled or on its way: never ask for two at once

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
  showAnalysis(view);
  document.body.dataset.toMove = view.to_move || "";
  document.body.dataset.gameOver = String(view.game_over);
  document.body.dataset.moves = String(view.moves.length);
  document.body.dataset.version = String(view.version);
  if (view.to_move === "agent" && !view.error) {
    text("status", `${view.agent} is thinking...`);
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
    text("message", `The server did not answer (${error}). Is evaluate.py serve still running?`);
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
request("/api/state");
