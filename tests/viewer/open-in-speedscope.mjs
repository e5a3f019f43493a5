// SPDX-License-Identifier: MIT
// Opens profiles in speedscope (the npm package) inside headless Chromium, the way speedscope's own CLI does, and
// checks that the page shows the expected frame names. The engine of pmc's real-viewer test (tests/viewer/viewer-test).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const usage = `usage: node open-in-speedscope.mjs --modules DIR [OPTIONS] FILE NAME... [-- FILE NAME...]...

Opens each FILE in speedscope (the npm package, from DIR/node_modules) in one headless Chromium, as
speedscope's CLI does (index.html#localProfilePath=...), and checks that every NAME after it is a frame name
in the sandwich view's table (the other views draw names on a canvas, which cannot be read from the page).
Options:
  --chromium PATH          the browser (default /usr/bin/chromium)
  --expect-refusal         the FILEs after it must fail instead (not opened, or a NAME missing): the check's
                           own test, in the same browser
  --one-row-per-name       for the FILEs after it, each NAME must be one row of the sandwich table: a row
                           "NAME {...}" (speedscope names a trace event's frame by its name and args, so
                           per-call args make every call a row of its own) fails it
  --screenshot PNG         (one FILE) once its names are shown, switch to --screenshot-view and save the page
  --screenshot-view VIEW   time-ordered (default), left-heavy or sandwich
  --size WxH               window size (default 1400x1000)
  --timeout SECONDS        how long to wait for one file's names (default 60: the machine may be loaded)
Exit status: 0 every FILE showed its names (after --expect-refusal: none did); 1 otherwise, saying what speedscope
showed or said; 2 usage; 77 the viewer cannot run here (packages missing, no Chromium, it does not start).`;

function skip(reason) {
    console.log(`SKIPPED: ${reason}`);
    process.exit(77);
}
function usageError(message) {
    console.error(`open-in-speedscope: ${message}\n${usage}`);
    process.exit(2);
}

const opt = { chromium: '/usr/bin/chromium', view: 'time-ordered', timeout: 60, size: '1400x1000' };
const cases = [[]]; // each [FILE, NAME...], with .refusal when it must fail
let refusal = false, oneRow = false;
const nextCase = () => {
    if (cases[cases.length - 1].length > 0) cases.push([]);
    cases[cases.length - 1].refusal = refusal;
    cases[cases.length - 1].oneRow = oneRow;
};
const args = process.argv.slice(2);
for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    const value = () => (i + 1 < args.length ? args[++i] : usageError(`${a} needs a value`));
    if (a === '-h' || a === '--help') { console.log(usage); process.exit(0); }
    else if (a === '--') nextCase();
    else if (a === '--modules') opt.modules = value();
    else if (a === '--chromium') opt.chromium = value();
    else if (a === '--expect-refusal') { refusal = true; nextCase(); }
    else if (a === '--one-row-per-name') { oneRow = true; nextCase(); }
    else if (a === '--screenshot') opt.screenshot = value();
    else if (a === '--screenshot-view') opt.view = value();
    else if (a === '--size') opt.size = value();
    else if (a === '--timeout') opt.timeout = Number(value());
    else if (a.startsWith('--')) usageError(`unknown option ${a}`);
    else cases[cases.length - 1].push(a);
}
const size = /^(\d+)x(\d+)$/.exec(opt.size);
if (!opt.modules) usageError('--modules DIR is required');
if (cases.some(c => c.length < 2)) usageError('each FILE needs at least one NAME');
if (!size || !(opt.timeout > 0)) usageError('bad --size or --timeout');
const tabs = { 'time-ordered': 'Time Order', 'left-heavy': 'Left Heavy', sandwich: 'Sandwich' };
if (!(opt.view in tabs)) usageError(`--screenshot-view: ${opt.view} is not time-ordered, left-heavy or sandwich`);
if (opt.screenshot && cases.length !== 1) usageError('--screenshot takes one FILE');

const require = createRequire(path.join(path.resolve(opt.modules), 'package.json'));
let chromium, speedscopeHtml;
try {
    ({ chromium } = require('playwright-core'));
    speedscopeHtml = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist/release/index.html');
} catch (e) {
    skip(`speedscope or playwright-core is not installed in ${opt.modules} (tests/viewer/install-viewer installs them): ${e.message.split('\n')[0]}`);
}
if (!fs.existsSync(opt.chromium)) skip(`no Chromium at ${opt.chromium} (Debian: apt-get install chromium; scripts/install-deps does)`);

let browser;
try {
    // --no-sandbox: Chromium's sandbox will not start as root. SwiftShader: speedscope draws with WebGL, which
    // headless Chromium without a GPU offers only through SwiftShader, and only when told it may.
    browser = await chromium.launch({
        executablePath: opt.chromium,
        headless: true,
        timeout: opt.timeout * 1000,
        args: ['--no-sandbox', '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--disable-dev-shm-usage'],
    });
} catch (e) {
    skip(`Chromium (${opt.chromium}) did not start as uid ${process.getuid()}: ${e.message.split('\n').slice(0, 3).join(' | ')}`);
}
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pmc-speedscope-'));

/// Whether a line of the page is frame NAME. speedscope names a trace event with arguments 'NAME {"arg":...}'
/// (its name, a space, its args as JSON), so a Chrome export shows one such row per call.
function shows(lines, name) {
    return lines.some(l => l === name || l.startsWith(`${name} {`));
}

/// In the page: the text of every row of every scrolled list, scrolled through a view at a time.
async function readWholeTable() {
    const drawn = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    await drawn(); // the rows render after their table's header
    const seen = new Set();
    const add = text => text.split('\n').map(s => s.trim()).filter(Boolean).forEach(l => seen.add(l));
    add(document.body.innerText);
    for (const el of document.querySelectorAll('*')) {
        if (el.scrollHeight <= el.clientHeight + 1 || !/auto|scroll/.test(getComputedStyle(el).overflowY)) continue;
        for (let top = 0; top < el.scrollHeight; top += Math.max(1, el.clientHeight - 40)) {
            el.scrollTop = top;
            await drawn();
            add(el.innerText);
        }
        el.scrollTop = 0;
    }
    return [...seen];
}

/// Opens one file; returns null when every name is shown, else what went wrong (speedscope's words included).
async function open(file, names, oneRow) {
    let profile;
    try {
        profile = fs.readFileSync(file);
    } catch (e) {
        return `cannot read ${file}: ${e.message}`;
    }
    // speedscope's CLI: a script that hands the file to the page, named by localProfilePath. The file's name goes
    // with it: speedscope picks its importer by name first (a trace-event file named *.chrome.json is misread).
    const script = path.join(work, `profile-${path.basename(file)}.js`);
    fs.writeFileSync(script, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(file))}, ${JSON.stringify(profile.toString('base64'))})`);
    const url = `file://${speedscopeHtml}#localProfilePath=${encodeURIComponent(script)}&view=sandwich`;

    const page = await browser.newPage({ viewport: { width: Number(size[1]), height: Number(size[2]) } });
    const complaints = []; // what speedscope said instead of showing the profile
    page.on('dialog', d => { complaints.push(`alert: ${d.message()}`); d.dismiss().catch(() => {}); });
    page.on('pageerror', e => complaints.push(`page error: ${e.message}`));
    page.on('console', m => {
        if (m.type() === 'error' || /Failed to load format/.test(m.text())) complaints.push(`console: ${m.text().split('\n')[0]}`);
    });
    await page.goto(url);

    // Poll until every name is on the page, or speedscope has given up (an alert, its error screen), or time is up.
    // Once the table is there ("Symbol Name", its header) with a name missing, the table is read whole: it only
    // renders the rows in view.
    const deadline = Date.now() + opt.timeout * 1000;
    let lines = [], missing = names;
    for (;;) {
        lines = (await page.evaluate(() => document.body.innerText)).split('\n').map(s => s.trim()).filter(Boolean);
        missing = names.filter(n => !shows(lines, n));
        if (missing.length > 0 && lines.some(l => l.endsWith('Symbol Name'))) {
            lines = await page.evaluate(readWholeTable);
            missing = names.filter(n => !shows(lines, n));
            break;
        }
        if (missing.length === 0) break;
        if (lines.some(l => /Something went wrong/.test(l)) || complaints.some(c => c.startsWith('alert'))) break;
        if (Date.now() > deadline) { complaints.push(`still missing after ${opt.timeout} s`); break; }
        await page.waitForTimeout(100);
    }
    if (missing.length > 0) {
        return [`speedscope's sandwich view does not show ${missing.map(n => JSON.stringify(n)).join(', ')} from ${file}`,
            ...complaints, `the page shows: ${lines.slice(0, 40).join(' | ')}`].join('\n  ');
    }
    if (oneRow) {
        const rows = await page.evaluate(readWholeTable);
        const perCall = rows.filter(l => names.some(n => l.startsWith(`${n} {`)));
        if (perCall.length > 0)
            return [`speedscope's sandwich view lists ${perCall.length} per-call rows instead of one per name, e.g. ` +
                `${perCall.slice(0, 3).map(l => JSON.stringify(l.slice(0, 80))).join(', ')} from ${file}`].join('\n  ');
    }
    if (opt.screenshot) {
        await page.getByText(tabs[opt.view]).first().click();
        // Two animation frames: the click's re-render, then the canvas drawn.
        await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
        await page.screenshot({ path: opt.screenshot });
        console.log(`screenshot (${opt.view}): ${opt.screenshot}`);
    }
    await page.close();
    return null;
}

let status = 0;
try {
    for (const c of cases) {
        const [file, ...names] = c;
        const problem = await open(file, names, c.oneRow);
        if (!c.refusal) {
            if (problem) status = 1;
            console.log(problem ? `FAILED: ${problem}` : `ok: speedscope shows ${names.join(', ')} from ${path.basename(file)}`);
        } else {
            if (!problem) status = 1;
            // The refusal's reasons, without the page dump.
            const why = problem && problem.replace(/\n {2}the page shows:.*$/s, '').replace(/\n {2}/g, '; ');
            console.log(problem ? `ok (refused, as it should be): ${why}`
                : `FAILED: speedscope showed ${names.join(', ')} from ${file}, which should have been refused`);
        }
    }
} catch (e) {
    status = 1;
    console.log(`FAILED: ${e.message}`);
} finally {
    await browser.close().catch(() => {});
    fs.rmSync(work, { recursive: true, force: true });
}
process.exit(status);
