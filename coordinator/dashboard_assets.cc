#include "coordinator/dashboard_assets.h"

namespace cohort::coordinator {

const char kDashboardHtml[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cohort</title>
<link rel="stylesheet" href="style.css">
<script src="static/chart.js"></script>
</head>
<body>
<header>
  <span class="brand">Cohort</span>
  <nav>
    <a href="#/jobs" id="nav-jobs">Jobs</a>
    <a href="#/arrays" id="nav-arrays">Arrays</a>
    <a href="#/nodes" id="nav-nodes">Nodes</a>
    <a href="#/studies" id="nav-studies">Studies</a>
    <a href="#/queues" id="nav-queues">Queues</a>
    <a href="#/usage" id="nav-usage">Usage</a>
  </nav>
  <span id="updated"></span>
</header>
<main id="main">Loading…</main>
<script src="app.js"></script>
</body>
</html>
)html";

const char kDashboardCss[] = R"css(
body { font-family: system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #243447; color: #fff; padding: 8px 16px; display: flex; gap: 24px;
         align-items: center; }
header a { color: #cfe3ff; margin-right: 16px; text-decoration: none; }
header a.active { color: #fff; font-weight: bold; }
.brand { font-weight: bold; font-size: 18px; }
#updated { margin-left: auto; font-size: 12px; color: #9ab; }
main { padding: 16px; }
table { border-collapse: collapse; width: 100%; background: #fff; margin-bottom: 16px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 8px; text-align: left; font-size: 13px; }
th { background: #f0f2f5; }
.state-RUNNING, .state-READY { color: #0a7d32; }
.state-FAILED, .state-LOST, .state-UNHEALTHY { color: #c62828; }
.state-SUCCEEDED { color: #1565c0; }
.state-QUEUED, .state-PENDING, .state-STARTING { color: #8d6e00; }
.state-SUSPENDED { color: #6a1b9a; }
.filters { margin-bottom: 12px; display: flex; gap: 8px; }
pre.log { background: #111; color: #ddd; padding: 8px; max-height: 320px; overflow: auto;
          font-size: 12px; }
.chart { background: #fff; max-width: 900px; height: 320px; margin-bottom: 16px; }
.error { color: #c62828; }
.bar { display: flex; width: 160px; height: 10px; background: #e3e3e3; }
.bar span { display: block; height: 100%; }
.bar-SUCCEEDED { background: #1565c0; }
.bar-FAILED { background: #c62828; }
.bar-RUNNING { background: #0a7d32; }
.bar-CANCELLED { background: #9e9e9e; }
)css";

const char kDashboardJs[] = R"js(
'use strict';
// The token the page was opened with (?token=...), handed on to every API call.
const TOKEN = new URLSearchParams(location.search).get('token');
const POLL_MS = 2000;
let timer = null;
let charts = [];

function api(path) {
  let url = 'api/' + path;
  if (TOKEN) url += (url.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(TOKEN);
  return fetch(url).then(r => r.ok ? r.json() : r.text().then(t => { throw new Error(t); }));
}
function esc(s) {
  return String(s === undefined || s === null ? '' : s).replace(/[&<>"']/g,
      c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}
function when(ms) { return ms > 0 ? new Date(ms).toLocaleString() : ''; }
function dur(ms) {
  if (!(ms > 0)) return '';
  const s = Math.round(ms / 1000);
  if (s < 120) return s + 's';
  if (s < 7200) return Math.round(s / 60) + 'm';
  return (s / 3600).toFixed(1) + 'h';
}
// What a running replica, or a node's replicas, use (null: nothing known): [CPU cores, memory,
// GPUs].
function usageCells(u) {
  if (!u) return ['', '', ''];
  const mib = b => b < 0 ? '' : (b >= 10 * 2 ** 30 ? Math.floor(b / 2 ** 30) + 'G'
                                                   : Math.floor(b / 2 ** 20) + 'M');
  return [u.cpu_cores >= 0 ? u.cpu_cores.toFixed(2) : '', mib(u.memory_bytes),
          esc(u.gpus.map(g => g.index + ': ' + Math.round(g.utilization) + '% ' +
                              mib(g.memory_used_bytes) + '/' + mib(g.memory_total_bytes))
                   .join(', ') + (u.gpus_idle_ms >= 60000 ? ' (idle ' + dur(u.gpus_idle_ms) + ')'
                                                          : ''))];
}
// A job's labels as `cohort list` shows them: "sweep=lr,team=vision", by key.
function labelText(labels) {
  return esc(Object.keys(labels).sort().map(k => k + '=' + labels[k]).join(','));
}
function st(s) { return '<span class="state-' + esc(s) + '">' + esc(s) + '</span>'; }
// The note kept with a node's cordon, as `cohort nodes` shows it: " <small>cordoned by alice
// since ...: why</small>"; '' when nothing of it is cordoned.
function cordonNote(n) {
  if (!(n.admin_since_ms > 0) && !n.admin_by && !n.admin_reason) return '';
  return ' <small class="cordon-note">' + esc(n.admin || 'GPUs cordoned') +
         (n.admin_by ? ' by ' + esc(n.admin_by) : '') +
         (n.admin_since_ms > 0 ? ' since ' + when(n.admin_since_ms) : '') +
         (n.admin_reason ? ': ' + esc(n.admin_reason) : '') + '</small>';
}
// How long a job ran: to its end, or until now.
function ranFor(j) {
  return dur((j.end_time_ms || Date.now()) - (j.start_time_ms || Date.now()));
}
const JOB_STATES = ['QUEUED', 'PENDING', 'RUNNING', 'SUSPENDED', 'CANCELLING', 'SUCCEEDED',
                    'FAILED', 'CANCELLED'];
// An array's tasks by state, as `cohort status ARRAY` counts them: "2 RUNNING, 3 QUEUED".
function tasksByState(a) {
  return JOB_STATES.filter(s => a.by_state[s]).map(s => a.by_state[s] + ' ' + st(s)).join(', ');
}
// A bar of an array's tasks: succeeded, failed, running and cancelled ones, of all its tasks.
function progressBar(a) {
  return '<div class="bar" title="' + a.ended + '/' + a.tasks + ' ended">' +
      ['SUCCEEDED', 'FAILED', 'RUNNING', 'CANCELLED'].filter(s => a.by_state[s]).map(s =>
          '<span class="bar-' + s + '" style="width:' + (100 * a.by_state[s] / a.tasks) +
          '%"></span>').join('') + '</div>';
}
// The array a job is a task of ("" for none).
function arrayOf(j) { return (j.labels || {})['cohort/array'] || ''; }
function table(headers, rows, id) {
  return '<table' + (id ? ' id="' + id + '"' : '') + '><thead><tr>' +
      headers.map(h => '<th>' + esc(h) + '</th>').join('') + '</tr></thead><tbody>' +
      rows.map(r => '<tr>' + r.map(c => '<td>' + c + '</td>').join('') + '</tr>').join('') +
      '</tbody></table>';
}
function link(hash, text) { return '<a href="#/' + hash + '">' + esc(text) + '</a>'; }
function setMain(html) { document.getElementById('main').innerHTML = html; }
function stamp() {
  document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
}
function destroyCharts() { charts.forEach(c => c.destroy()); charts = []; }

// Curves: one dataset per (series label), x = step.
function drawChart(canvasId, title, datasets) {
  const canvas = document.getElementById(canvasId);
  if (!canvas || typeof Chart === 'undefined') return;
  charts.push(new Chart(canvas.getContext('2d'), {
    type: 'line',
    data: {datasets: datasets},
    options: {animation: false, responsive: true, maintainAspectRatio: false,
              parsing: false, plugins: {title: {display: true, text: title}},
              scales: {x: {type: 'linear', title: {display: true, text: 'step'}}}}
  }));
  canvas.dataset.drawn = datasets.reduce((n, d) => n + d.data.length, 0);
}
// Bars: one per label, x = the label (usage by user and queue, or by a label's value).
function drawBars(canvasId, title, labels, values) {
  const canvas = document.getElementById(canvasId);
  if (!canvas || typeof Chart === 'undefined') return;
  charts.push(new Chart(canvas.getContext('2d'), {
    type: 'bar',
    data: {labels: labels, datasets: [{label: title, data: values, backgroundColor: '#1565c0'}]},
    options: {animation: false, responsive: true, maintainAspectRatio: false,
              plugins: {title: {display: true, text: title}, legend: {display: false}}}
  }));
  canvas.dataset.drawn = values.length;
}
// A filter form: its non-empty fields become the query of `view`'s hash when submitted.
function onFilter(view) {
  document.getElementById('filters').onsubmit = e => {
    e.preventDefault();
    const p = new URLSearchParams(new FormData(e.target));
    [...p.keys()].forEach(k => { if (!p.get(k)) p.delete(k); });
    location.hash = '#/' + view + '?' + p.toString();
  };
}
const COLORS = ['#1565c0', '#c62828', '#2e7d32', '#ef6c00', '#6a1b9a', '#00838f', '#5d4037'];
function seriesByTag(points, prefix) {
  const tags = {};
  points.forEach(p => { (tags[p.tag] = tags[p.tag] || []).push({x: p.step, y: p.value}); });
  return Object.keys(tags).sort().map((t, i) => ({
    label: (prefix || '') + t, data: tags[t].sort((a, b) => a.x - b.x),
    borderColor: COLORS[i % COLORS.length], pointRadius: 2, borderWidth: 1.5}));
}

const views = {
  jobs(args, params) {
    const q = new URLSearchParams();
    ['state', 'queue', 'user', 'name', 'selector'].forEach(k => {
      if (params.get(k)) q.set(k, params.get(k));
    });
    q.set('limit', params.get('limit') || '200');
    return api('jobs?' + q.toString()).then(d => {
      const f = k => esc(params.get(k) || '');
      setMain('<h2>Jobs</h2><form class="filters" id="filters">' +
          '<select name="state"><option value="">any state</option>' +
          ['QUEUED', 'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLING', 'CANCELLED',
           'SUSPENDED']
              .map(s => '<option' + (params.get('state') === s ? ' selected' : '') + '>' + s +
                        '</option>').join('') + '</select>' +
          '<input name="queue" placeholder="queue" value="' + f('queue') + '">' +
          '<input name="user" placeholder="user" value="' + f('user') + '">' +
          '<input name="name" placeholder="name contains" value="' + f('name') + '">' +
          '<input name="selector" placeholder="labels: team=vision" value="' + f('selector') +
          '">' +
          '<button>Filter</button></form>' +
          '<p id="job-count">' + d.total + ' jobs' + (d.total > d.jobs.length ?
              ' (newest ' + d.jobs.length + ' shown)' : '') + '</p>' +
          // A Labels column once a listed job has labels, as `cohort list` has.
          (labelled => table(['Name', 'State', 'Queue', 'User', 'Replicas', 'GPUs', 'Restarts',
                              'Submitted', 'Ran for', ...(labelled ? ['Labels'] : []), 'Message'],
                d.jobs.map(j => [link('job/' + j.name, j.name) + (arrayOf(j) ?
                                     ' <small>' + link('array/' + arrayOf(j), 'array ' +
                                                       arrayOf(j)) + '</small>' : ''),
                                 st(j.state), esc(j.queue), esc(j.user), j.replicas, j.gpus,
                                 j.restarts, when(j.create_time_ms), ranFor(j),
                                 ...(labelled ? [labelText(j.labels)] : []),
                                 esc(j.message)]), 'jobs'))(
              d.jobs.some(j => Object.keys(j.labels).length > 0)));
      onFilter('jobs');
    });
  },
  job(args, params) {
    const name = args[0];
    const replica = params.get('replica') || 'chief-0';
    return Promise.all([api('jobs/' + encodeURIComponent(name)),
                        api('jobs/' + encodeURIComponent(name) + '/metrics'),
                        api('jobs/' + encodeURIComponent(name) + '/log?replica=' +
                            encodeURIComponent(replica))]).then(([j, m, log]) => {
      destroyCharts();
      setMain('<h2 id="job-name">' + esc(j.name) + ' ' + st(j.state) + '</h2>' +
          '<p>' + esc(j.message) + '</p>' +
          '<p>queue ' + esc(j.queue) + ' · user ' + esc(j.user) +
          (arrayOf(j) ? ' · task of ' + link('array/' + arrayOf(j), 'array ' + arrayOf(j)) : '') +
          (Object.keys(j.labels || {}).length ? ' · labels ' + labelText(j.labels) : '') +
          ' · restarts ' + j.restarts +
          '/' + j.max_restarts +
          (j.max_restarts > 0 && j.restart_rule ? ', each of ' + esc(j.restart_rule) : '') +
          ' · submitted ' + when(j.create_time_ms) +
          (j.end_time_ms ? ' · ended ' + when(j.end_time_ms) : '') + '</p>' +
          '<h3>Replicas</h3>' +
          table(['Replica', 'State', 'Node', 'Attempt', 'GPUs', 'Exit', 'CPU', 'Memory',
                 'GPU use', 'Message', 'Log'],
                j.replica_list.map(r => [esc(r.name), st(r.state), esc(r.node), r.attempt,
                                         esc(r.gpus.join(',')), r.exit_code >= 0 ? r.exit_code : '',
                                         ...usageCells(r.usage), esc(r.message),
                                         link('job/' + j.name + '?replica=' + r.name, 'log')]),
                'replicas') +
          (m.points.length ? '<h3>Metrics</h3><div class="chart"><canvas id="job-curve">' +
                                 '</canvas></div>' : '') +
          '<h3>Log of ' + esc(replica) + ' (attempt ' + log.attempt + ', tail)</h3>' +
          '<pre class="log" id="log">' + esc(log.text) + '</pre>' +
          '<h3>Events</h3>' +
          table(['Time', 'Event'], j.events.slice().reverse().map(e => [when(e.time_ms),
                                                                        esc(e.message)]),
                'events'));
      if (m.points.length) drawChart('job-curve', j.name, seriesByTag(m.points));
      const pre = document.getElementById('log');
      pre.scrollTop = pre.scrollHeight;
    });
  },
  // Job arrays as `cohort status ARRAY` sums each up: its tasks by state, how many are in flight
  // of its parallelism; ACTIVE until every task has ended.
  arrays(args, params) {
    const q = new URLSearchParams();
    ['state', 'user', 'queue', 'name'].forEach(k => { if (params.get(k)) q.set(k, params.get(k)); });
    return api('arrays?' + q.toString()).then(arrays => {
      const f = k => esc(params.get(k) || '');
      setMain('<h2>Arrays</h2><form class="filters" id="filters">' +
          '<select name="state"><option value="">any state</option>' +
          ['ACTIVE', 'SUCCEEDED', 'FAILED', 'CANCELLED']
              .map(s => '<option' + (params.get('state') === s ? ' selected' : '') + '>' + s +
                        '</option>').join('') + '</select>' +
          '<input name="queue" placeholder="queue" value="' + f('queue') + '">' +
          '<input name="user" placeholder="user" value="' + f('user') + '">' +
          '<input name="name" placeholder="name contains" value="' + f('name') + '">' +
          '<button>Filter</button></form>' +
          table(['Array', 'State', 'Indexes', 'Tasks', 'Progress', 'In flight', 'By state',
                 'Queue', 'User', 'Submitted', 'Ran for'],
                arrays.map(a => [link('array/' + a.name, a.name), st(a.state), esc(a.array),
                                 a.tasks, progressBar(a), a.in_flight +
                                     (a.parallelism ? '/' + a.parallelism : ''),
                                 tasksByState(a), esc(a.queue), esc(a.user),
                                 when(a.create_time_ms), ranFor(a)]), 'arrays'));
      onFilter('arrays');
    });
  },
  // One array: its tasks by index, those of one state with ?state=S.
  array(args, params) {
    return api('arrays/' + encodeURIComponent(args[0])).then(a => {
      const only = params.get('state') || '';
      const tasks = a.task_list.filter(t => !only || t.state === only);
      setMain('<h2 id="array-name">' + esc(a.name) + ' ' + st(a.state) + '</h2>' +
          '<p id="array-summary">' + a.tasks + ' tasks (' + esc(a.array) + '): ' +
          tasksByState(a) + ' · in flight ' + a.in_flight +
          (a.parallelism ? ' of at most ' + a.parallelism : '') + ' · queue ' + esc(a.queue) +
          ' · owner ' + esc(a.user) + ' · submitted ' + when(a.create_time_ms) +
          (a.end_time_ms ? ' · ended ' + when(a.end_time_ms) : '') + '</p>' + progressBar(a) +
          '<p>' + ['', ...JOB_STATES.filter(s => a.by_state[s])].map(s =>
              s === only ? '<b>' + (s || 'all') + '</b>'
                         : link('array/' + a.name + (s ? '?state=' + s : ''), s || 'all'))
              .join(' · ') + '</p>' +
          table(['Index', 'Task', 'State', 'Restarts', 'Started', 'Ran for', 'Message'],
                tasks.map(t => [t.index, link('job/' + t.name, t.name), st(t.state), t.restarts,
                                when(t.start_time_ms), t.start_time_ms ? ranFor(t) : '',
                                esc(t.message)]), 'tasks'));
    });
  },
  nodes() {
    return api('nodes').then(nodes => setMain('<h2>Nodes</h2>' + table(
        ['Node', 'State', 'Address', 'GPUs (used/total)', 'CPUs', 'Memory (MiB)', 'CPU use',
         'Memory use', 'GPU use', 'Heartbeat', 'Replicas'],
        nodes.map(n => [link('node/' + n.node_id, n.node_id),
                        st(n.state) + (n.unhealthy ? ' <small>' + esc(n.unhealthy) + '</small>' : '') +
                          cordonNote(n),
                        esc(n.address),
                        n.gpus_allocated + '/' + n.gpus + (n.unhealthy_gpus || []).map(g =>
                            ' <small>GPU ' + g.index + ' unfit: ' + esc(g.reason) + '</small>').join('') +
                          (n.cordoned_gpus || []).map(g => ' <small>GPU ' + g + ' cordoned' +
                              ((n.gpus_used || []).includes(g) ? ' (in use)' : '') +
                              '</small>').join(''),
                        n.cpus, n.memory_mb,
                        ...usageCells(n.usage),
                        (n.heartbeat_age_ms / 1000).toFixed(1) + 's ago',
                        n.replicas.map(r => link('job/' + r.split('/')[0], r)).join(' ')]),
        'nodes')));
  },
  // One node as `cohort nodes NODE` shows it: each GPU (model, memory, NUMA node, UUID, use,
  // who holds it or why nothing new goes there), then the replicas holding part of it.
  node(args) {
    return api('nodes?events_of=' + encodeURIComponent(args[0])).then(nodes => {
      const n = nodes.find(x => x.node_id === args[0]);
      if (!n) throw new Error('no node ' + args[0]);
      const use = {};
      ((n.usage && n.usage.gpus) || []).forEach(g => { use[g.index] = g; });
      const gib = b => Math.floor(b / 2 ** 30) + 'G';
      const why = g => [...g.holders.map(h => link('job/' + h.split('/')[0], h)),
                        ...(n.unhealthy_gpus || []).filter(u => u.index === g.index)
                               .map(u => 'unfit: ' + esc(u.reason)),
                        ...((n.cordoned_gpus || []).includes(g.index) ? ['cordoned'] : [])];
      setMain('<h2 id="node-name">' + esc(n.node_id) + ' ' + st(n.state) + '</h2>' +
          '<p>' + esc(n.address) + ' · CPUs ' + n.cpus + ' · memory ' + n.memory_mb + ' MiB' +
          ' · heartbeat ' + (n.heartbeat_age_ms / 1000).toFixed(1) + 's ago' +
          (n.version ? ' · cohort-agent ' + esc(n.version) : '') +
          (n.agent_up_ms > 0 ? ', started ' + dur(n.agent_up_ms) + ' ago' : '') +
          (Object.keys(n.labels || {}).length ? ' · labels ' + labelText(n.labels) : '') +
          (n.unhealthy ? ' · fails its health check: ' + esc(n.unhealthy) : '') +
          cordonNote(n) + '</p>' +
          '<h3>GPUs</h3>' +
          table(['GPU', 'Model', 'Memory (MiB)', 'NUMA', 'UUID', 'Use', 'State'],
                n.gpu_list.map(g => [g.index, esc(g.model), g.memory_mb || '',
                                     g.numa_node >= 0 ? g.numa_node : '', esc(g.uuid),
                                     use[g.index] ? Math.round(use[g.index].utilization) + '% ' +
                                         gib(use[g.index].memory_used_bytes) + '/' +
                                         gib(use[g.index].memory_total_bytes) : '',
                                     why(g).join(', ') || 'free']),
                'gpus') +
          '<h3>Replicas</h3>' +
          (n.replicas.length ? table(['Replica'], n.replicas.map(r => [link('job/' + r.split('/')[0],
                                                                             r)]),
                                     'node-replicas')
                             : '<p id="node-replicas">none</p>') +
          // Its history, newest first, as `cohort nodes NODE` lists it.
          '<h3>Events</h3>' +
          ((n.events || []).length
               ? table(['Time', 'Event'], n.events.slice().reverse().map(e => [when(e.time_ms),
                                                                                 esc(e.text)]),
                       'node-events')
               : '<p id="node-events">none</p>'));
    });
  },
  studies() {
    return api('studies').then(studies => setMain('<h2>Studies</h2>' + table(
        ['Study', 'State', 'Metric', 'Goal', 'Algorithm', 'Trials', 'Best trial', 'Message'],
        studies.map(s => [link('study/' + s.name, s.name), st(s.state), esc(s.metric),
                          esc(s.goal), esc(s.algorithm), s.trials.length + '/' + s.max_trials,
                          esc(s.best_trial), esc(s.message)]), 'studies')));
  },
  study(args) {
    return api('studies/' + encodeURIComponent(args[0])).then(s => {
      destroyCharts();
      const best = s.trials.find(t => t.id === s.best_trial);
      setMain('<h2 id="study-name">' + esc(s.name) + ' ' + st(s.state) + '</h2>' +
          '<p>' + esc(s.goal) + ' ' + esc(s.metric) + ' · ' + esc(s.algorithm) +
          (best ? ' · best trial <b id="best-trial">' + esc(best.id) + '</b> (' +
                      best.final_metric + ')' : '') + '</p>' +
          '<div class="chart"><canvas id="study-curve"></canvas></div>' +
          table(['Trial', 'State', 'Parameters', s.metric, 'Steps', 'Job', 'Message'],
                s.trials.map(t => [esc(t.id) + (t.id === s.best_trial ? ' ★' : ''), st(t.state),
                                   esc(Object.entries(t.parameters)
                                           .map(([k, v]) => k + '=' + v).join(' ')),
                                   t.final_metric === null ? '' : t.final_metric, t.steps,
                                   link('job/' + t.job, t.job), esc(t.message)]),
                'trials'));
      const datasets = [];
      s.trials.forEach((t, i) => {
        const pts = t.points.filter(p => p.tag === s.metric)
                        .map(p => ({x: p.step, y: p.value})).sort((a, b) => a.x - b.x);
        if (pts.length) {
          datasets.push({label: 'trial ' + t.id + (t.state === 'STOPPED' ? ' (stopped)' : ''),
                         data: pts, borderColor: COLORS[i % COLORS.length], pointRadius: 2,
                         borderWidth: 1.5, borderDash: t.state === 'STOPPED' ? [4, 3] : []});
        }
      });
      drawChart('study-curve', s.metric + ' per trial', datasets);
    });
  },
  // Accounting as `cohort usage` shows it: GPU- and CPU-hours, jobs and failures by user and
  // queue, or by the value of one job label; a period, a label selector.
  usage(args, params) {
    const q = new URLSearchParams();
    ['since', 'by_label', 'selector', 'user', 'queue'].forEach(k => {
      if (params.get(k)) q.set(k, params.get(k));
    });
    return api('usage?' + q.toString()).then(d => {
      destroyCharts();
      const f = k => esc(params.get(k) || '');
      const key = params.get('by_label') || '';
      const hours = h => h.toFixed(4);
      // Each row's name, and the jobs page that lists its jobs.
      const name = r => key ? (r.label === null ? '<none>' : r.label === '' ? '""' : r.label)
                            : r.user + ' / ' + r.queue;
      const jobs = r => key ? 'jobs?selector=' + encodeURIComponent(
                                  r.label === null ? '!' + key : key + '=' + r.label)
                            : 'jobs?user=' + encodeURIComponent(r.user) + '&queue=' +
                                  encodeURIComponent(r.queue);
      const total = d.rows.reduce((t, r) => [t[0] + r.jobs, t[1] + r.failed, t[2] + r.gpu_hours,
                                             t[3] + r.cpu_hours], [0, 0, 0, 0]);
      const gpus = d.rows.some(r => r.gpu_hours > 0);
      setMain('<h2>Usage</h2><form class="filters" id="filters">' +
          '<select name="since">' +
          [['', 'all time'], ['24h', 'last 24 hours'], ['7d', 'last 7 days'],
           ['30d', 'last 30 days']]
              .map(([v, text]) => '<option value="' + v + '"' +
                                  ((params.get('since') || '') === v ? ' selected' : '') + '>' +
                                  text + '</option>').join('') + '</select>' +
          '<input name="by_label" placeholder="by label: team" value="' + f('by_label') + '">' +
          '<input name="selector" placeholder="labels: team=vision" value="' + f('selector') +
          '">' +
          '<input name="user" placeholder="user" value="' + f('user') + '">' +
          '<input name="queue" placeholder="queue" value="' + f('queue') + '">' +
          '<button>Show</button></form>' +
          '<p id="usage-period">' + (d.since_ms ? 'since ' + when(d.since_ms) : 'all time') +
          ': ' + total[0] + ' jobs, ' + hours(total[2]) + ' GPU-hours, ' + hours(total[3]) +
          ' CPU-hours</p>' +
          (d.rows.length ? '<div class="chart"><canvas id="usage-chart"></canvas></div>' : '') +
          table([...(key ? [key] : ['User', 'Queue']), 'Jobs', 'Failed', 'GPU-hours', 'CPU-hours'],
                d.rows.map(r => [...(key ? [link(jobs(r), name(r))]
                                         : [link(jobs(r), r.user), esc(r.queue)]),
                                 r.jobs, r.failed, hours(r.gpu_hours), hours(r.cpu_hours)]),
                'usage'));
      onFilter('usage');
      if (d.rows.length) {
        drawBars('usage-chart', gpus ? 'GPU-hours' : 'CPU-hours', d.rows.map(name),
                 d.rows.map(r => gpus ? r.gpu_hours : r.cpu_hours));
      }
    });
  },
  // As `cohort queues`: use against quota ("6/4" borrows 2), weight, the defaults per GPU, the
  // gpu-idle-limit, the next jobs to place; then its jobs by state. A queue only jobs name (since
  // removed from the config) has its jobs alone.
  queues() {
    const perGpu = q => [q.cpus_per_gpu > 0 ? q.cpus_per_gpu + ' CPUs' : '',
                         q.memory_mb_per_gpu > 0 ? q.memory_mb_per_gpu + ' MB' : '']
                            .filter(s => s).join(', ') || '-';
    return api('queues').then(qs => setMain('<h2>Queues</h2>' + table(
        ['Queue', 'Weight', 'GPUs', 'CPUs', 'Per GPU', 'GPU idle limit', 'Next', 'Queued',
         'Pending', 'Running', 'Suspended', 'Succeeded', 'Failed', 'Cancelled'],
        qs.map(q => [link('jobs?queue=' + q.name, q.name)].concat(
            q.configured ? [q.weight, q.gpus_used + '/' + q.gpu_quota,
                            q.cpus_used + '/' + (q.cpu_quota < 0 ? '-' : q.cpu_quota),
                            perGpu(q), dur(q.gpu_idle_limit_ms),
                            q.waiting_jobs.slice(0, 3).map(j => link('job/' + j, j)).join(', ') +
                                (q.waiting_jobs.length > 3 ? ', ...' : '')]
                         : ['', '', '', '', '', '<small>not configured</small>'],
            [q.jobs.QUEUED, q.jobs.PENDING, q.jobs.RUNNING, q.jobs.SUSPENDED, q.jobs.SUCCEEDED,
             q.jobs.FAILED, q.jobs.CANCELLED])), 'queues') +
        '<p><small>GPUs and CPUs: used/quota (a queue may borrow idle capacity beyond its quota)' +
        '; per GPU: what a replica gets for each GPU where its job file gives no cpus or ' +
        'memory_mb; a job of a queue with a GPU idle limit fails when all its GPUs sit idle ' +
        'that long' +
        '</small></p>'));
  },
};

function route() {
  clearTimeout(timer);
  const hash = location.hash.replace(/^#\/?/, '') || 'jobs';
  const [path, query] = hash.split('?');
  const parts = path.split('/').map(decodeURIComponent);
  const view = views[parts[0]] || views.jobs;
  document.querySelectorAll('header nav a').forEach(a => {
    a.classList.toggle('active', a.id === 'nav-' + parts[0] ||
                                 (a.id === 'nav-jobs' && parts[0] === 'job') ||
                                 (a.id === 'nav-nodes' && parts[0] === 'node') ||
                                 (a.id === 'nav-arrays' && parts[0] === 'array') ||
                                 (a.id === 'nav-studies' && parts[0] === 'study'));
  });
  const current = location.hash;
  view(parts.slice(1), new URLSearchParams(query || '')).then(stamp).catch(e => {
    setMain('<p class="error">' + esc(e.message) + '</p>');
  }).finally(() => {
    // Poll the page shown; while a form field has the focus (typing a filter), wait.
    timer = setTimeout(function tick() {
      if (location.hash !== current) return;
      if (document.activeElement && document.activeElement.form) {
        timer = setTimeout(tick, POLL_MS);
        return;
      }
      route();
    }, POLL_MS);
  });
}
window.addEventListener('hashchange', route);
route();
)js";

}  // namespace cohort::coordinator
