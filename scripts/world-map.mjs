// Writes crates/server/src/dashboard/world.svg, the dashboard map's land
// outline: Natural Earth 1:110m land (public domain), through npm's
// world-atlas, in an equirectangular projection where x = longitude + 180
// and y = 90 - latitude, so the page places a data center without a
// projection of its own. Run once at development time; the SVG is committed
// and nothing is fetched at run time:
//
//   cd "$(mktemp -d)" && npm install world-atlas@2.0.2 topojson-client@3.1.0 d3-geo@3.1.2 \
//     && node /path/to/pharos/scripts/world-map.mjs > /path/to/pharos/crates/server/src/dashboard/world.svg
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

// The packages are installed where the script is run, not beside it.
const require = createRequire(process.cwd() + "/");
const fromHere = (name) => import(pathToFileURL(require.resolve(name)).href);
const { feature } = await fromHere("topojson-client");
const { geoEquirectangular, geoPath } = await fromHere("d3-geo");
const land = feature(require("world-atlas/land-110m.json"), "land");
const projection = geoEquirectangular().scale(180 / Math.PI).translate([180, 90]);
const outline = geoPath(projection).digits(1)(land);
process.stdout.write(
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 360 180">` +
    `<!-- Natural Earth 1:110m land, public domain, via world-atlas 2.0.2 -->` +
    `<path class="land" d="${outline}"/></svg>\n`,
);
