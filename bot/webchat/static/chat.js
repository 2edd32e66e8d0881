// The web chat: a small Telegram app for one learner, talking to coursebot's built-in Bot API
// server over a WebSocket. The server pushes every change in the chat; this page only draws
// it and reports what the person did. Text is rendered from Telegram's entities (offsets in
// UTF-16 code units, which is what JavaScript strings count), never through innerHTML.
"use strict";

const LEARNER_KEY = "coursebot.learner";
const TIME_ZONE_SENT = "coursebot.time-zone-sent."; // + learner id: the zone is reported once per learner
const TOAST_MS = 2500;
const ACTION_MS = 5000; // Telegram shows a chat action ("typing…") for 5 s or until the next message
const TAP_PENDING_MS = 15000; // Telegram stops waiting for a callback answer after 15 s
const BLOCKS = new Set(["pre", "blockquote", "expandable_blockquote"]);
const CARET_LINE = /^[ \t]*[\^~]+[ \t^~]*$/; // Python's markers under the source line of a traceback
const FENCE = "```";
const MIN_PAIR_SCALE = 0.7; // a traceback line shrinks to 9 px at most (Telegram's phones go to 11 dp), then scrolls
// Telegram's phone apps add a line on Enter; Telegram Web on a desktop sends (tweb: isSendShortcutPressed).
const PHONE = matchMedia("(pointer: coarse)").matches && !matchMedia("(any-pointer: fine)").matches;

const $ = (id) => document.getElementById(id);
const state = {
  socket: null,
  learner: null,
  ui: {},
  retry: 500, // ms before reconnecting, doubled up to 8 s
  toastTimer: 0,
  actionTimer: 0,
  pending: new Set(),
  codeColumns: 36,
};

// ---------------------------------------------------------------- connection

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + location.host + "/ws");
  state.socket = socket;
  socket.addEventListener("open", () => {
    state.retry = 500;
    const remembered = Number(localStorage.getItem(LEARNER_KEY)) || null;
    const hello = { type: "hello", learner: remembered, language: (navigator.language || "en").toLowerCase() };
    if (!remembered || !localStorage.getItem(TIME_ZONE_SENT + remembered)) hello.time_zone = timeZone();
    send(hello);
  });
  socket.addEventListener("message", (event) => receive(JSON.parse(event.data)));
  socket.addEventListener("close", () => {
    if (state.socket !== socket) return;
    $("offline").textContent = state.ui.offline || "…";
    $("offline").hidden = false;
    setTimeout(connect, state.retry); // a dropped connection is retried, the chat is never polled
    state.retry = Math.min(state.retry * 2, 8000);
  });
}

function send(message) {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(message));
}

function receive(message) {
  switch (message.type) {
    case "ready": return ready(message);
    case "message": return showMessage(message, false);
    case "edited": return showMessage(message, true);
    case "deleted": return removeMessage(message.message_id);
    case "answered": return answered(message);
    case "action": return chatAction(message.action);
    case "banner": return banner(message);
    case "error": return toast(message.text);
  }
}

// --------------------------------------------------------------------- ready

function ready(message) {
  const root = document.documentElement;
  $("offline").hidden = true;
  state.learner = message.learner;
  state.ui = message.ui;
  state.commands = message.commands;
  state.codeColumns = message.code_columns;
  localStorage.setItem(LEARNER_KEY, String(message.learner.id));
  localStorage.setItem(TIME_ZONE_SENT + message.learner.id, "1");
  root.style.setProperty("--code-columns", String(message.code_columns));
  root.lang = message.language || "en";
  root.dir = message.rtl ? "rtl" : "ltr";
  $("bot-name").textContent = message.bot.first_name;
  $("bot-status").textContent = state.ui.bot;
  $("menu-button").textContent = state.ui.menu;
  $("settings-button").setAttribute("aria-label", state.ui.settings);
  $("send-button").setAttribute("aria-label", state.ui.send);
  $("send-button").title = state.ui.send;
  $("input").placeholder = PHONE ? state.ui.placeholder_phone : state.ui.placeholder;
  $("start-button").textContent = state.ui.start;
  showStart(!message.started);
  clearAction();
  $("language-label").textContent = state.ui.language;
  $("learners-label").textContent = state.ui.learners;
  $("new-learner").textContent = "+ " + state.ui.new_learner;
  $("alert-ok").textContent = state.ui.ok;
  $("preview-note").textContent = state.ui.preview;
  document.title = message.bot.first_name + " — " + message.learner.first_name;

  const select = $("language-select");
  select.replaceChildren();
  for (const [code, name] of message.languages) select.append(new Option(name, code));
  // A regional code the browser gave (en-us) is kept as the app sends it, named after its language.
  const current = message.languages.find(([code]) => code === message.language);
  if (!current && message.language) {
    const base = message.languages.find(([code]) => code === message.language.split("-")[0]);
    select.append(new Option(base ? base[1] + " (" + message.language + ")" : message.language, message.language));
  }
  select.value = message.language;

  const list = $("learner-list");
  list.replaceChildren();
  for (const learner of message.learners) {
    const button = element("button", learner.id === message.learner.id ? "current" : "", learner.first_name);
    button.type = "button";
    button.dataset.learner = String(learner.id);
    button.addEventListener("click", () => { closeSettings(); send({ type: "switch", learner: learner.id }); });
    list.append(button);
  }

  $("messages").replaceChildren();
  for (const view of message.history) showMessage(view, false);
  $("banner").hidden = true;
  renderCommands();
  scrollToEnd(true);
}

// ------------------------------------------------------------------ messages

function showMessage(view, edited) {
  const message = view.message;
  if (message.from.is_bot && !edited) clearAction(); // the bot's message ends its "typing…"
  if (!message.from.is_bot) showStart(false);
  const id = "m" + message.message_id;
  const node = renderMessage(view);
  const old = document.getElementById(id);
  if (old) {
    old.replaceWith(node); // an edit changes the message where it is
  } else if (!edited) {
    const near = isNearEnd();
    $("messages").append(node);
    scrollToEnd(near || !message.from.is_bot);
  }
  if (edited) for (const button of node.querySelectorAll("button.pending")) button.classList.remove("pending");
}

function removeMessage(messageId) {
  const old = document.getElementById("m" + messageId);
  if (old) old.remove();
}

function renderMessage(view) {
  const message = view.message;
  const outgoing = !message.from.is_bot;
  const row = element("div", "row " + (outgoing ? "out" : "in"));
  row.id = "m" + message.message_id;
  row.dataset.messageId = String(message.message_id);
  const bubble = element("div", "bubble");
  if (message.poll) {
    bubble.append(renderPoll(message, view.chosen || []));
  } else if (message.photo) {
    bubble.classList.add("media");
    bubble.append(renderPhoto(message));
  } else {
    const text = element("div", "text");
    text.dir = "auto";
    text.append(renderEntities(message.text || message.caption || "", message.entities || message.caption_entities || []));
    bubble.append(text);
  }
  const meta = element("span", "meta", (message.edit_date ? "✎ " : "") + clock(message.date));
  bubble.append(meta);
  row.append(bubble);
  const keyboard = message.reply_markup && message.reply_markup.inline_keyboard;
  if (keyboard && keyboard.length) row.append(renderKeyboard(message, keyboard));
  return row;
}

function clock(seconds) {
  const date = new Date(seconds * 1000);
  return String(date.getHours()).padStart(2, "0") + ":" + String(date.getMinutes()).padStart(2, "0");
}

// Telegram's entities to DOM: sorted by offset, outer first; each one holds the ones that start inside it.
function renderEntities(text, entities) {
  const fragment = document.createDocumentFragment();
  const sorted = [...entities].sort((a, b) => a.offset - b.offset || b.length - a.length);
  build(fragment, text, 0, text.length, sorted);
  return fragment;
}

function build(parent, text, start, end, entities) {
  let position = start;
  let index = 0;
  while (index < entities.length) {
    const entity = entities[index];
    const from = Math.max(entity.offset, position);
    const to = Math.min(entity.offset + entity.length, end);
    let next = index + 1;
    const inner = [];
    while (next < entities.length && entities[next].offset < entity.offset + entity.length) inner.push(entities[next++]);
    index = next;
    if (to <= from) continue;
    if (from > position) parent.append(text.slice(position, from));
    const node = entityNode(entity, text.slice(from, to));
    const holder = node.querySelector("code") || node;
    if (entity.type === "pre") codeLines(holder, text.slice(from, to)); // Telegram nests nothing in a block
    else build(holder, text, from, to, inner);
    parent.append(node);
    position = to;
    // a block already ends its line: the line feed after it is not an empty line, as in Telegram
    if (BLOCKS.has(entity.type) && text[position] === "\n" && position < end) position += 1;
  }
  if (position < end) parent.append(text.slice(position, end));
}

function entityNode(entity, content) {
  switch (entity.type) {
    case "bold": return element("b");
    case "italic": return element("i");
    case "underline": return element("u");
    case "strikethrough": return element("s");
    case "spoiler": {
      const span = element("span", "spoiler");
      span.addEventListener("click", () => span.classList.add("shown"));
      return span;
    }
    case "code": return element("code");
    case "pre": {
      const pre = element("pre");
      const code = element("code");
      if (entity.language) code.className = "language-" + entity.language;
      pre.append(code);
      pre.addEventListener("click", () => copy(content));
      return pre;
    }
    case "blockquote":
    case "expandable_blockquote": return element("blockquote");
    case "text_link": return link(entity.url);
    case "url": return link(content);
    case "email": return link("mailto:" + content);
    case "bot_command": {
      const span = element("span", "command");
      span.addEventListener("click", () => send({ type: "send", text: content }));
      return span;
    }
    default: return element("span");
  }
}

function link(url) {
  const a = element("a");
  const safe = /^(https?:|mailto:)/i.test(url) ? url : /^[a-z][a-z0-9+.-]*:/i.test(url) ? "" : "http://" + url;
  if (safe) a.href = safe;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  return a;
}

// --------------------------------------------------------------------- code

// A code block, one element per line, so that a line the screen is too narrow for wraps under a hanging
// indent with a ↪ (CSS), never back to column 0 where it would read as less indented Python. A traceback's
// caret line stays with its source line: the two never wrap, they shrink together (then scroll), so each
// ^ stays under its token.
function codeLines(code, text) {
  code.replaceChildren();
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index += 1) {
    if (index + 1 < lines.length && CARET_LINE.test(lines[index + 1])) {
      code.append(caretPair(lines[index], lines[index + 1]));
      index += 1;
    } else {
      code.append(codeLine(lines[index]));
    }
  }
}

function codeLine(text) {
  const line = element("span", "line", text);
  const indent = columnsOf(text.match(/^[ \t]*/)[0]);
  // Continuation rows start 2 columns right of the line's own indentation, at most half the width.
  line.style.setProperty("--hang", String(Math.min(indent + 2, Math.floor(state.codeColumns / 2))));
  return line;
}

function caretPair(source, carets) {
  const pair = element("span", "pair");
  pair.append(element("span", "line", source), element("span", "line", carets));
  const wide = Math.max(columnsOf(source), columnsOf(carets));
  if (wide > state.codeColumns) pair.style.fontSize = Math.max(state.codeColumns / wide, MIN_PAIR_SCALE) + "em";
  return pair;
}

// Columns a line takes in a monospace font, as lint counts them: wide (CJK) characters take two, a tab four.
function columnsOf(text) {
  let columns = 0;
  for (const character of text) {
    const code = character.codePointAt(0);
    columns += character === "\t" ? 4 : isWide(code) ? 2 : 1;
  }
  return columns;
}

function isWide(code) {
  return (code >= 0x1100 && code <= 0x115f) || (code >= 0x2e80 && code <= 0xa4cf && code !== 0x303f)
    || (code >= 0xac00 && code <= 0xd7a3) || (code >= 0xf900 && code <= 0xfaff) || (code >= 0xfe30 && code <= 0xfe4f)
    || (code >= 0xff00 && code <= 0xff60) || (code >= 0xffe0 && code <= 0xffe6) || (code >= 0x1f300 && code <= 0x1faff)
    || (code >= 0x20000 && code <= 0x3fffd);
}

// -------------------------------------------------------------------- photos

function renderPhoto(message) {
  const figure = element("div", "photo");
  const largest = message.photo[message.photo.length - 1];
  const image = element("img");
  image.src = "/photo/" + encodeURIComponent(largest.file_id);
  image.width = largest.width;
  image.height = largest.height;
  image.alt = message.caption || "";
  image.addEventListener("click", () => window.open(image.src, "_blank", "noopener"));
  figure.append(image);
  if (message.caption) {
    const caption = element("div", "text caption");
    caption.dir = "auto";
    caption.append(renderEntities(message.caption, message.caption_entities || []));
    if (message.show_caption_above_media) figure.prepend(caption);
    else figure.append(caption);
  }
  return figure;
}

// ------------------------------------------------------------------- buttons

function renderKeyboard(message, rows) {
  const keyboard = element("div", "keyboard");
  for (const row of rows) {
    const line = element("div", "krow");
    for (const spec of row) {
      const button = element("button", "", spec.text);
      button.type = "button";
      button.dir = "auto";
      button.addEventListener("click", () => press(message, spec, button));
      line.append(button);
    }
    keyboard.append(line);
  }
  return keyboard;
}

function press(message, spec, button) {
  if (spec.callback_data !== undefined) {
    button.classList.add("pending");
    state.pending.add(button);
    setTimeout(() => button.classList.remove("pending"), TAP_PENDING_MS);
    send({ type: "tap", message_id: message.message_id, data: spec.callback_data });
  } else if (spec.url) {
    window.open(spec.url, "_blank", "noopener");
  } else if (spec.copy_text) {
    copy(spec.copy_text.text);
  }
}

function answered(message) {
  for (const button of state.pending) button.classList.remove("pending");
  state.pending.clear();
  if (!message.text) return;
  if (message.alert) showAlert(message.text);
  else toast(message.text);
}

// --------------------------------------------------------------------- polls

function renderPoll(message, chosen) {
  const poll = message.poll;
  const box = element("div", "poll");
  const question = element("div", "question");
  question.dir = "auto";
  question.append(renderEntities(poll.question, poll.question_entities || []));
  box.append(question);
  box.append(element("div", "kind", poll.type === "quiz" ? state.ui.quiz : ""));
  const answered = chosen.length > 0 || poll.is_closed;
  const correct = poll.correct_option_ids || [];
  const total = poll.total_voter_count || 0;
  poll.options.forEach((option, index) => {
    if (!answered) {
      const button = element("button", "option");
      button.type = "button";
      button.dir = "auto";
      button.append(element("span", "circle"), element("span", "", option.text));
      button.addEventListener("click", () => send({ type: "vote", message_id: message.message_id, options: [index] }));
      box.append(button);
      return;
    }
    const isCorrect = correct.includes(index);
    const isChosen = chosen.includes(index);
    const verdict = poll.type === "quiz" ? (isCorrect ? "right" : isChosen ? "wrong" : "") : "";
    const result = element("div", "result " + verdict);
    const pct = total ? Math.round((100 * option.voter_count) / total) : 0;
    const line = element("div", "line");
    line.append(
      element("span", "pct", pct + "%"),
      element("span", "mark", verdict === "right" ? "✓" : verdict === "wrong" ? "✗" : isChosen ? "•" : ""),
      element("span", "", option.text),
    );
    line.dir = "auto";
    const bar = element("div", "bar");
    bar.style.width = "calc(" + pct + "% - 44px)";
    result.append(line, bar);
    result.dataset.option = String(index);
    box.append(result);
  });
  if (answered && poll.explanation) {
    const explanation = element("div", "explanation");
    explanation.dir = "auto";
    explanation.append("💡 ", renderEntities(poll.explanation, poll.explanation_entities || []));
    box.append(explanation);
  }
  return box;
}

// ------------------------------------------------------------------ composer

function sendInput() {
  const input = $("input");
  const text = input.value.trim(); // as Telegram's apps do
  if (!text) return;
  send({ type: "send", text });
  input.value = "";
  grow();
}

function grow() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = Math.min(input.scrollHeight, 180) + "px";
}

function onKey(event) {
  const input = event.target;
  if (event.key === "Tab" && !event.ctrlKey && !event.altKey && !event.metaKey) {
    event.preventDefault(); // code needs indentation more than focus moves
    input.setRangeText("    ", input.selectionStart, input.selectionEnd, "end");
    grow();
  } else if (event.key === "Enter" && sendsOnEnter(event, input)) {
    event.preventDefault();
    sendInput();
  }
}

// Enter sends as in Telegram Web on a desktop; Shift+Enter, a phone's keyboard, an input method still
// composing, or a ``` code block left open adds a line. Ctrl+Enter sends everywhere.
function sendsOnEnter(event, input) {
  if (event.isComposing) return false;
  if (event.ctrlKey || event.metaKey) return true;
  if (PHONE || event.shiftKey || event.altKey) return false;
  return !insideOpenFence(input.value.slice(0, input.selectionStart));
}

function insideOpenFence(before) {
  return before.split(FENCE).length % 2 === 0; // an odd number of fences before the caret
}

function showStart(shown) {
  $("start-bar").hidden = !shown;
  $("composer").hidden = shown;
}

function timeZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || null;
  } catch (error) {
    return null;
  }
}

function chatAction(action) {
  clearTimeout(state.actionTimer);
  const status = $("bot-status");
  status.textContent = action === "upload_photo" ? state.ui.sending_photo : state.ui.typing;
  status.classList.add("acting");
  state.actionTimer = setTimeout(clearAction, ACTION_MS);
}

function clearAction() {
  clearTimeout(state.actionTimer);
  const status = $("bot-status");
  status.textContent = state.ui.bot || "";
  status.classList.remove("acting");
}

function renderCommands() {
  const menu = $("command-menu");
  menu.replaceChildren();
  for (const command of state.commands || []) {
    const item = element("button");
    item.type = "button";
    item.setAttribute("role", "menuitem");
    item.append(element("span", "name", "/" + command.command), element("span", "description", command.description));
    item.addEventListener("click", () => { menu.hidden = true; send({ type: "send", text: "/" + command.command }); });
    menu.append(item);
  }
  $("menu-button").hidden = !(state.commands || []).length;
}

// -------------------------------------------------------------- the rest of the UI

function banner(message) {
  $("banner").hidden = !message.lines.length;
  $("banner-title").textContent = message.title;
  $("banner-lines").textContent = message.lines.join("\n");
}

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.dir = "auto";
  box.hidden = false;
  clearTimeout(state.toastTimer);
  state.toastTimer = setTimeout(() => { box.hidden = true; }, TOAST_MS);
}

function showAlert(text) {
  $("alert-text").textContent = text;
  $("alert-text").dir = "auto";
  $("alert").hidden = false;
}

function copy(text) {
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(() => toast(state.ui.copied), () => {});
}

function closeSettings() { $("settings").hidden = true; }

function isNearEnd() {
  const box = $("messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToEnd(really) {
  if (really) { const box = $("messages"); box.scrollTop = box.scrollHeight; }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function start() {
  const input = $("input");
  input.addEventListener("keydown", onKey);
  input.addEventListener("input", grow);
  $("send-button").addEventListener("click", sendInput);
  $("menu-button").addEventListener("click", () => { $("command-menu").hidden = !$("command-menu").hidden; });
  $("settings-button").addEventListener("click", () => { $("settings").hidden = false; });
  $("settings").addEventListener("click", (event) => { if (event.target === $("settings")) closeSettings(); });
  $("language-select").addEventListener("change", (event) => {
    closeSettings();
    send({ type: "language", language: event.target.value });
  });
  $("new-learner").addEventListener("click", () => {
    closeSettings();
    send({ type: "new_learner", time_zone: timeZone() });
  });
  $("start-button").addEventListener("click", () => send({ type: "send", text: "/start" }));
  $("alert-ok").addEventListener("click", () => { $("alert").hidden = true; });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { closeSettings(); $("command-menu").hidden = true; }
  });
  connect();
}

document.addEventListener("DOMContentLoaded", start);
