"""Loads the daemon's pages in a real headless Chromium and prints one JSON result.

Run by tests/integration/browser.rs as `python drive.py SPEC.json`, with the Python of a venv
holding Playwright (never its own browser download: the system Chromium is given by path). SPEC:

    {"chromium": "/usr/bin/chromium",
     "start": "http://127.0.0.1:PORT/view/login?t=...",  # loaded first (sets the cookie)
     "origin": "http://127.0.0.1:PORT",                   # every other origin is refused
     "pages": [{"name": "runs", "path": "/view/runs",
                "texts": ["..."],          # is each in the page's rendered text?
                "selectors": ["..."],      # how many elements match each?
                "top": 1150}],             # also a picture of the page's top this high (optional)
     "out": "/path/to/screenshots",
     "axe": "/path/to/axe.min.js" or null,
     "flag": "gfPwned",                    # a global the hostile text would set if it ran
     "timeout_ms": 20000}

Four browser contexts share the cookie the start URL set. With the pages' Content-Security-Policy
in force: a desktop one (1280x800) and a phone one (390x844) load each page, record its console
errors, uncaught errors, dialogs, the flag, the texts and selectors, and a screenshot; every
request to another origin is recorded and aborted. With the policy lifted (so that axe-core, a
script of its own, can run): axe-core runs on each page in the light and the dark colour scheme
and at phone width, and its serious and critical violations are recorded. A last context with JavaScript off loads
each page and records the texts again. The browser is closed before the result is printed.
"""

import json
import os
import sys

from playwright.sync_api import sync_playwright

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
AXE_IMPACTS = ("serious", "critical")
# The contexts axe-core runs in: (label, colour scheme, size).
LIFTED = (("light", "light", DESKTOP), ("dark", "dark", DESKTOP), ("phone", "light", PHONE))


class Watch:
    """What one browser context saw: console errors, uncaught errors, dialogs and requests to
    another origin, each tagged with the page being loaded."""

    def __init__(self, context, origin):
        self.origin = origin
        self.current = "(start)"
        self.console = []
        self.errors = []
        self.dialogs = []
        self.outside = []
        context.route("**/*", self.route)

    def route(self, route, request):
        url = request.url
        if url == self.origin or url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.outside.append({"page": self.current, "url": url})
            route.abort()

    def attach(self, page):
        page.on("console", self.on_console)
        page.on("pageerror", lambda e: self.errors.append({"page": self.current, "text": str(e)}))
        page.on("dialog", self.on_dialog)

    def on_console(self, msg):
        if msg.type == "error":
            self.console.append({"page": self.current, "text": msg.text})

    def on_dialog(self, dialog):
        self.dialogs.append({"page": self.current, "type": dialog.type, "message": dialog.message})
        dialog.dismiss()

    def of(self, name):
        pick = lambda rows: [r for r in rows if r["page"] == name]
        return {
            "console_errors": pick(self.console),
            "page_errors": pick(self.errors),
            "dialogs": pick(self.dialogs),
            "outside_requests": pick(self.outside),
        }


def probe(page, spec, flag):
    """The page's rendered text checks, selector counts, the flag and its width."""
    text = page.evaluate("() => document.body ? document.body.innerText : ''")
    return {
        "title": page.title(),
        # innerText is the text as shown, so CSS may have changed its case.
        "texts": {t: t.lower() in text.lower() for t in spec.get("texts", [])},
        "selectors": {s: page.locator(s).count() for s in spec.get("selectors", [])},
        "flag": page.evaluate("(f) => window[f] === undefined ? null : String(window[f])", flag),
        "scroll_width": page.evaluate("() => document.documentElement.scrollWidth"),
    }


def visit(page, watch, origin, spec):
    watch.current = spec["name"]
    response = page.goto(origin + spec["path"], wait_until="load")
    return {
        "status": response.status if response else None,
        "url": page.url,
        "csp": (response.headers.get("content-security-policy") if response else None),
    }


def shoot(page, out, name, label):
    path = os.path.join(out, f"{name}-{label}.png")
    page.screenshot(path=path, full_page=True)
    return {"label": label, "path": path, "bytes": os.path.getsize(path)}


def blank_bytes(page, out, label):
    """The size of a screenshot of an empty page at this context's size: what a page's own
    screenshot is measured against."""
    page.goto("about:blank")
    return shoot(page, out, "_blank", label)["bytes"]


def axe_run(page, axe):
    page.add_script_tag(path=axe)
    found = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ')),
            }));
        }"""
    )
    return [v for v in found if v["impact"] in AXE_IMPACTS]


def with_policy(browser, spec, result):
    """The desktop and phone contexts, the pages' policy in force: loads the start URL, then each
    page; returns the cookies the start URL set, for the other contexts."""
    origin, flag, out = spec["origin"], spec.get("flag", "gfPwned"), spec["out"]
    desktop = browser.new_context(viewport=DESKTOP)
    desktop.set_default_timeout(spec.get("timeout_ms", 20000))
    watch = Watch(desktop, origin)
    page = desktop.new_page()
    watch.attach(page)
    response = page.goto(spec["start"], wait_until="load")
    result["start"] = {
        "status": response.status if response else None,
        "url": page.url,
        **watch.of("(start)"),
    }
    state = desktop.storage_state()
    result["cookies"] = [
        {k: c[k] for k in ("name", "path", "httpOnly", "sameSite")} for c in state["cookies"]
    ]
    result["blank"] = {"desktop": blank_bytes(page, out, "desktop")}
    for s in spec["pages"]:
        row = visit(page, watch, origin, s)
        row.update(probe(page, s, flag))
        row["screenshots"] = [shoot(page, out, s["name"], "desktop")]
        if s.get("top"):
            # The top of the page alone, `top` pixels high (the README's picture).
            path = os.path.join(out, f"{s['name']}-desktop-top.png")
            clip = {"x": 0, "y": 0, "width": DESKTOP["width"], "height": s["top"]}
            page.screenshot(path=path, full_page=True, clip=clip)
            row["top"] = {"path": path, "bytes": os.path.getsize(path)}
        result["pages"][s["name"]] = row
    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, storage_state=state)
    phone.set_default_timeout(spec.get("timeout_ms", 20000))
    phone_watch = Watch(phone, origin)
    phone_page = phone.new_page()
    phone_watch.attach(phone_page)
    result["blank"]["phone"] = blank_bytes(phone_page, out, "phone")
    for s in spec["pages"]:
        row = result["pages"][s["name"]]
        row["phone"] = visit(phone_page, phone_watch, origin, s)
        row["phone"].update(probe(phone_page, s, flag))
        row["screenshots"].append(shoot(phone_page, out, s["name"], "phone"))
    for s in spec["pages"]:
        row = result["pages"][s["name"]]
        seen, seen_phone = watch.of(s["name"]), phone_watch.of(s["name"])
        for key in seen:
            row[key] = seen[key] + seen_phone[key]
    desktop.close()
    phone.close()
    return state


def policy_lifted(browser, spec, result, state, label, scheme, viewport):
    """A context with the policy lifted, in colour scheme `scheme` at size `viewport`: axe-core on
    each page, and the flag and dialogs again (the escaping alone must keep a hostile text
    inert); recorded under `label`."""
    origin, flag = spec["origin"], spec.get("flag", "gfPwned")
    lifted = browser.new_context(
        viewport=viewport, bypass_csp=True, color_scheme=scheme, storage_state=state
    )
    lifted.set_default_timeout(spec.get("timeout_ms", 20000))
    watch = Watch(lifted, origin)
    page = lifted.new_page()
    watch.attach(page)
    for s in spec["pages"]:
        visit(page, watch, origin, s)
        row = result["pages"][s["name"]]
        row.setdefault("without_policy", {})[label] = {
            "flag": probe(page, s, flag)["flag"],
            "dialogs": watch.of(s["name"])["dialogs"],
        }
        if spec.get("axe"):
            row.setdefault("axe", {})[label] = axe_run(page, spec["axe"])
    lifted.close()


def script_off(browser, spec, result, state):
    """A context with JavaScript off: each page's texts again."""
    origin = spec["origin"]
    plain = browser.new_context(viewport=DESKTOP, java_script_enabled=False, storage_state=state)
    plain.set_default_timeout(spec.get("timeout_ms", 20000))
    watch = Watch(plain, origin)
    page = plain.new_page()
    for s in spec["pages"]:
        visit(page, watch, origin, s)
        text = page.inner_text("body").lower()
        result["pages"][s["name"]]["texts_without_js"] = {
            t: t.lower() in text for t in s.get("texts", [])
        }
    plain.close()


def main():
    spec = json.load(open(sys.argv[1]))
    os.makedirs(spec["out"], exist_ok=True)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    result = {"pages": {}}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=spec["chromium"], args=args)
        try:
            result["browser"] = browser.version
            state = with_policy(browser, spec, result)
            for label, scheme, viewport in LIFTED:
                policy_lifted(browser, spec, result, state, label, scheme, viewport)
            script_off(browser, spec, result, state)
        finally:
            browser.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
