// The Pharos dashboard: reads the control API with the operator's token
// (kept in this tab's session storage) and draws what it returns. Every
// value is put in as text, never as markup.
"use strict";

const TOKEN_KEY = "pharos-token";
const REFRESH_MS = 10000;
const SVG = "http://www.w3.org/2000/svg";
// Rough centres of the continents a region may be made of (latitude,
// longitude), to draw where its clients come from.
const CONTINENT_CENTRES = {
  AF: [2, 20], AN: [-80, 0], AS: [35, 90], EU: [50, 15], NA: [45, -100], OC: [-25, 135], SA: [-15, -60],
};

const $ = (id) => document.getElementById(id);
let refreshTimer = null;

/// Refused by the API: the token is wrong or missing.
class Unauthorized extends Error {}

async function api(path) {
  const response = await fetch(path, { headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) } });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) throw new Unauthorized(body.error || "the token was refused");
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

/// An element with attributes and children (strings become text).
function el(tag, attributes = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

const percent = (share) => (share === null || share === undefined ? "–" : (100 * share).toFixed(1) + " %");

function showLogin(message) {
  clearInterval(refreshTimer);
  sessionStorage.removeItem(TOKEN_KEY);
  $("board").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
}

async function refresh() {
  try {
    const [services, health, load, split, datacenters, regions, queries, events, zones] = await Promise.all(
      ["/v1/services", "/v1/health", "/v1/load", "/v1/split", "/v1/datacenters", "/v1/regions", "/v1/queries", "/v1/events", "/v1/zones"].map(api),
    );
    $("login").hidden = true;
    $("board").hidden = false;
    $("logout").hidden = false;
    drawServices(services, health, load);
    drawSplit(split);
    drawRate(queries.minutes);
    drawMap(services, split, datacenters, regions);
    drawZones(zones);
    drawEvents(events);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    if (error instanceof Unauthorized) showLogin("Refused: " + error.message);
    else $("updated").textContent = "update failed: " + error.message;
  }
}

function drawServices(services, health, load) {
  const probed = new Map(health.map((entry) => [entry.service + "/" + entry.replica, entry]));
  const loads = new Map(load.replicas.map((entry) => [entry.service + "/" + entry.replica, entry.load]));
  const blocks = services.map((service) => {
    const rows = service.replica.map((replica) => {
      const key = service.name + "/" + replica.id;
      const [state, why] = replicaState(replica, probed.get(key));
      const replicaLoad = loads.has(key) ? loads.get(key).toFixed(2) : "–";
      return el("tr", { "data-replica": replica.id },
        el("td", {}, replica.id), el("td", {}, replica.address), el("td", {}, replica.datacenter || "–"),
        el("td", {}, String(replica.weight)), el("td", { class: state, title: why }, state), el("td", { class: "load" }, replicaLoad));
    });
    const head = el("tr", {}, ...["Replica", "Address", "Data center", "Weight", "State", "Load"].map((name) => el("th", {}, name)));
    return el("div", { class: "service", "data-service": service.name },
      el("h3", {}, service.name, " ", el("span", { class: "note" }, `${service.policy}, TTL ${service.ttl} s`)),
      el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
  });
  $("services").replaceChildren(...blocks);
}

/// A replica's state and why: disabled or marked down by hand, else what
/// its probes say, else up as far as anyone knows.
function replicaState(replica, probed) {
  if (!replica.enabled) return ["disabled", "disabled in its service"];
  if (replica.down) return ["down", "marked down by hand"];
  if (probed) return [probed.up ? "up" : "down", probed.probe + ": " + probed.last];
  return ["up", "not probed"];
}

function drawSplit(split) {
  $("split-window").textContent =
    `First answers over the last ${Math.round(split.window_seconds)} s. ` +
    "Each bar: configured share (light, above) and realized share (dark, below); with resolvers tallied, " +
    "their share of resolvers' cache time (orange, the traffic caching sends).";
  const blocks = split.splits.map((entry) => {
    const distance = entry.total_variation === null ? "" : `, total variation ${entry.total_variation.toFixed(3)}`;
    const resolvers = entry.resolvers ? `; ${entry.resolvers.resolvers} resolvers, the busiest with ` +
      `${percent(entry.resolvers.top_resolver_share)} of the answers, caching skew ${entry.resolvers.caching_skew.toFixed(3)}` : "";
    const rows = entry.replicas.map((share) => el("div", { class: "bar-row", "data-replica": share.replica },
      el("span", {}, share.replica),
      el("div", { class: "bars" }, bar("configured", share.configured || 0), bar("realized", share.realized),
        ...(share.cached === null ? [] : [bar("cached", share.cached)])),
      el("span", {},
        el("span", { class: "legend-configured configured-share" }, percent(share.configured)), " / ",
        el("span", { class: "legend-realized realized-share" }, percent(share.realized)),
        ...(share.cached === null ? [] : [" / ", el("span", { class: "legend-cached cached-share" }, percent(share.cached))]))));
    return el("div", { class: "split", "data-service": entry.service, "data-region": entry.region },
      el("h3", {}, `${entry.service}, region ${entry.region}`, " ",
        el("span", { class: "note" }, `${entry.answers} answers${distance}${resolvers}`)),
      ...rows);
  });
  $("split").replaceChildren(...(blocks.length ? blocks : [el("p", { class: "note" }, "No routed answers in the window yet.")]));
}

function bar(kind, share) {
  const node = el("div", { class: "bar " + kind });
  node.style.width = (100 * share).toFixed(1) + "%";
  return node;
}

function drawRate(minutes) {
  const chart = $("rate");
  const [width, height, bottom] = [600, 160, 14];
  const most = Math.max(1, ...minutes.map((minute) => minute.queries));
  const slot = width / 61;
  const columns = minutes.map((minute, index) => {
    const tall = ((height - bottom - 12) * minute.queries) / most;
    const x = width - (minutes.length - index) * slot;
    const label = `${new Date(minute.start * 1000).toLocaleTimeString()}: ${minute.queries} queries`;
    return el("svg:rect", { class: "column", x: x.toFixed(1), y: (height - bottom - tall).toFixed(1), width: (slot - 1).toFixed(1),
      height: tall.toFixed(1), "data-queries": minute.queries }, el("svg:title", {}, label));
  });
  const axis = [
    el("svg:text", { x: 0, y: height - 2 }, "an hour ago"),
    el("svg:text", { x: width, y: height - 2, "text-anchor": "end" }, "now"),
    el("svg:text", { x: 0, y: 10 }, `${most} per minute`),
  ];
  chart.replaceChildren(...columns, ...axis);
  const total = minutes.reduce((sum, minute) => sum + minute.queries, 0);
  const current = minutes.length ? minutes[minutes.length - 1].queries : 0;
  $("rate-total").textContent = `${total} queries in the last hour, ${current} in the minute under way`;
}

let worldOutline = null;

/// The land outline, fetched once: a static file, no token needed.
async function world() {
  if (!worldOutline) {
    const text = await (await fetch("/dashboard/world.svg")).text();
    worldOutline = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  }
  return document.importNode(worldOutline, true);
}

/// The map's x and y of a place: the outline is equirectangular,
/// 360 by 180, with longitude -180 at the left and latitude 90 at the top.
const place = (latitude, longitude) => [longitude + 180, 90 - latitude];

async function drawMap(services, split, datacenters, regions) {
  const map = await world();
  const sites = new Map(datacenters.map((datacenter) => [datacenter.id, place(datacenter.latitude, datacenter.longitude)]));
  const flows = regionFlows(services, split);
  const origins = new Map(regions.filter((region) => region.continents && CONTINENT_CENTRES[region.continents[0]])
    .map((region) => [region.name, place(...CONTINENT_CENTRES[region.continents[0]])]));
  for (const flow of flows) {
    const from = origins.get(flow.region);
    const to = sites.get(flow.datacenter);
    if (from && to && flow.share > 0) {
      map.append(el("svg:line", { class: "flow", x1: from[0], y1: from[1], x2: to[0], y2: to[1], "stroke-width": (0.3 + 2 * flow.share).toFixed(2) }));
    }
  }
  for (const [name, [x, y]] of origins) {
    map.append(el("svg:circle", { class: "region", cx: x, cy: y, r: 1.2 }), el("svg:text", { class: "region-label", x: x + 2, y: y + 1.5 }, name));
  }
  for (const [id, [x, y]] of sites) {
    map.append(el("svg:circle", { class: "datacenter", cx: x, cy: y, r: 1.8, "data-datacenter": id }, el("svg:title", {}, id)),
      el("svg:text", { class: "datacenter-label", x: x + 2.5, y: y - 1.5 }, id));
  }
  $("map").replaceChildren(map);
  const rows = flows.map((flow) => el("tr", {}, el("td", {}, flow.region), el("td", {}, flow.service),
    el("td", {}, flow.datacenter), el("td", {}, `${percent(flow.share)} ${flow.realized ? "realized" : "configured"}`)));
  $("flows").tBodies[0].replaceChildren(...rows);
}

/// Where each region's clients go, by data center: the realized split
/// where a region had answers, else the configured probabilities.
function regionFlows(services, split) {
  const datacenterOf = new Map(services.flatMap((service) => service.replica.map((replica) => [service.name + "/" + replica.id, replica.datacenter])));
  const flows = new Map();
  const add = (service, region, replica, share, realized) => {
    const datacenter = datacenterOf.get(service + "/" + replica);
    if (!datacenter) return;
    const key = [region, service, datacenter].join("\n");
    const flow = flows.get(key) || { region, service, datacenter, share: 0, realized };
    flow.share += share;
    flows.set(key, flow);
  };
  const measured = new Set();
  for (const entry of split.splits) {
    const service = services.find((spec) => spec.name.replace(/\.$/, "") === entry.service.replace(/\.$/, ""));
    if (!service || entry.answers === 0) continue;
    measured.add(service.name + "\n" + entry.region);
    for (const share of entry.replicas) add(service.name, entry.region, share.replica, share.realized, true);
  }
  for (const service of services) {
    for (const [region, table] of Object.entries(service.probabilities || {})) {
      if (measured.has(service.name + "\n" + region)) continue;
      const total = Object.values(table).reduce((sum, row) => sum + row.probability, 0) || 1;
      for (const [replica, row] of Object.entries(table)) add(service.name, region, replica, row.probability / total, false);
    }
  }
  return [...flows.values()].sort((a, b) => a.region.localeCompare(b.region) || a.service.localeCompare(b.service) || b.share - a.share);
}

function drawZones(zones) {
  const rows = zones.map((zone) => el("tr", {},
    el("td", {}, zone.name), el("td", {}, zone.kind === "store" ? "the store" : "a file"),
    el("td", {}, String(zone.serial)), el("td", {}, zone.signed ? "yes" : "no")));
  $("zones").tBodies[0].replaceChildren(...rows);
}

function drawEvents(events) {
  const items = events.slice().reverse().map((event) => el("li", { class: event.kind },
    el("time", {}, new Date(event.at).toLocaleString()), event.text));
  $("events").replaceChildren(...(items.length ? items : [el("li", { class: "note" }, "Nothing yet.")]));
}

async function explain(submitted) {
  submitted.preventDefault();
  const query = new URLSearchParams({ name: $("explain-name").value, client: $("explain-client").value, qtype: $("explain-qtype").value });
  try {
    const reply = await api("/v1/explain?" + query);
    const answer = reply.answer.map(([id, address]) => `${id} (${address})`).join(", ") || "nothing";
    $("explained").replaceChildren(
      el("p", { id: "explained-answer" }, `Answer: ${answer}; region ${reply.region}, scope /${reply.scope}, TTL ${reply.ttl} s`),
      el("ol", {}, ...reply.steps.map((step) => el("li", {}, step))),
      el("p", { class: "note" }, "Fast path: " + reply.fast_path));
  } catch (error) {
    if (error instanceof Unauthorized) return showLogin("Refused: " + error.message);
    $("explained").replaceChildren(el("p", { class: "error" }, error.message));
  }
}

function start() {
  $("login-form").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token").value = "";
    startRefreshing();
  });
  $("logout").addEventListener("click", () => showLogin(""));
  $("explain-form").addEventListener("submit", explain);
  if (sessionStorage.getItem(TOKEN_KEY)) startRefreshing();
}

function startRefreshing() {
  clearInterval(refreshTimer);
  refresh();
  refreshTimer = setInterval(refresh, REFRESH_MS);
}

start();
