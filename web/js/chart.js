// A small line chart drawn as SVG by the page itself: one series, its time span on the x axis,
// a few gridlines, the latest value marked. Redrawn to the container's width.

import { s } from './dom.js';

const HEIGHT = 150;
const PAD = { top: 12, right: 14, bottom: 24, left: 50 };
const MAX_POINTS = 400;

/** Averages points into at most `max` time buckets so a day of readings stays a light drawing. */
export function downsample(points, max = MAX_POINTS) {
  if (points.length <= max) return points;
  const start = points[0].t;
  const span = points[points.length - 1].t - start || 1;
  const buckets = new Map();
  for (const point of points) {
    const index = Math.min(max - 1, Math.floor(((point.t - start) / span) * max));
    const bucket = buckets.get(index) ?? { t: 0, v: 0, n: 0 };
    bucket.t += point.t;
    bucket.v += point.v;
    bucket.n += 1;
    buckets.set(index, bucket);
  }
  return [...buckets.keys()].sort((a, b) => a - b).map((key) => {
    const bucket = buckets.get(key);
    return { t: bucket.t / bucket.n, v: bucket.v / bucket.n };
  });
}

function niceStep(range, count) {
  const raw = range / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / power;
  return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
}

const minutes = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const seconds = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

/**
 * Draws `points` ([{t: ms, v: number}], oldest first) into `svg`.
 * `from`/`to` bound the x axis (ms); `unit` labels the y axis; `label` names the series.
 */
export function drawChart(svg, { points, from, to, unit, label, className }) {
  const width = Math.max(240, Math.round(svg.parentElement?.clientWidth || 480));
  svg.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(HEIGHT));
  svg.replaceChildren();
  svg.dataset.points = String(points.length);

  const data = downsample(points);
  const plotW = width - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  let low = data.length ? Infinity : 0;
  let high = data.length ? -Infinity : 1;
  for (const point of data) {
    low = Math.min(low, point.v);
    high = Math.max(high, point.v);
  }
  if (high - low < 1) {
    const middle = (high + low) / 2;
    low = middle - 0.5;
    high = middle + 0.5;
  }
  const step = niceStep(high - low, 3);
  low = Math.floor(low / step) * step;
  high = Math.ceil(high / step) * step;
  const start = Math.min(from, data[0]?.t ?? from);
  const end = Math.max(to, start + 60_000);
  const x = (t) => PAD.left + ((t - start) / (end - start)) * plotW;
  const y = (v) => PAD.top + (1 - (v - low) / (high - low)) * plotH;

  const title = s('title', {}, label);
  svg.append(title);
  const grid = s('g', { class: 'chart-grid' });
  const decimals = step < 1 ? 1 : 0;
  for (let v = low; v <= high + step / 2; v += step) {
    grid.append(s('line', { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v) }));
    grid.append(s('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, `${v.toFixed(decimals)} ${unit}`));
  }
  const timeFormat = end - start < 15 * 60_000 ? seconds : minutes;
  const ticks = [start, (start + end) / 2, end];
  ticks.forEach((t, index) => {
    const anchor = index === 0 ? 'start' : index === ticks.length - 1 ? 'end' : 'middle';
    grid.append(s('text', { x: x(t), y: HEIGHT - 6, 'text-anchor': anchor }, timeFormat.format(new Date(t))));
  });
  svg.append(grid);

  if (data.length === 0) {
    svg.append(s('text', { x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, 'text-anchor': 'middle', class: 'chart-empty' },
      'No readings yet'));
    return;
  }
  const line = data.map((point, index) => `${index ? 'L' : 'M'}${x(point.t).toFixed(1)},${y(point.v).toFixed(1)}`).join('');
  const area = `${line}L${x(data[data.length - 1].t).toFixed(1)},${y(low)}L${x(data[0].t).toFixed(1)},${y(low)}Z`;
  svg.append(s('path', { d: area, class: `chart-area ${className}` }));
  svg.append(s('path', { d: line, class: `chart-line ${className}` }));
  const last = data[data.length - 1];
  svg.append(s('circle', { cx: x(last.t), cy: y(last.v), r: 3.5, class: `chart-dot ${className}` }));
}
