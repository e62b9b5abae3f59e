"""The live dashboard (`rig serve`): Flask, served by waitress.

Pages: the fleet overview (stations, campaigns with progress, cycles per hour and ETA, findings
per class, dead drives, rig errors), one page per campaign and one per model. Each page reloads
its live parts from `/fragment/...` every few seconds, so progress moves while cuts run; the
report part of a campaign or model page is the HTML report's own content (reports/render/html.py)
for
that campaign or model.

Reading needs no credentials. Submitting and stopping campaigns (`POST /api/...`) need the
dashboard's token (`Authorization: Bearer <token>`), and go to the central database under a
dispatch role of their own (`--dispatch DSN`): the reading side never holds a role that can write.
"""

from __future__ import annotations

import datetime
import hmac
import html as htmllib
import logging
import threading
import time
from typing import Any
from urllib.parse import quote

import jinja2
from flask import Flask, Response, abort, jsonify, request
from markupsafe import Markup

from reports import (
    REPORT_STYLE,
    ModelDriveSummary,
    ModelSummary,
    analyse,
    exposure_row,
    pct,
    render_html,
)
from rig.errors import UserError
from rig.interface.fleet import station_watch
from rig.interface.fleet.verdicts import VerdictBoard
from rig.interface.fleet.views import CampaignProgress, CentralView, FleetView, Overview, StoreView
from rig.notify import settings
from rig.notify.sender import Notifier, apprise_services

log = logging.getLogger("rig.interface.fleet.dashboard")
PROGRESS_EVERY_MS = 2000
REPORT_EVERY_MS = 10000

PAGE_STYLE = """
body{font-family:system-ui,sans-serif;margin:20px;color:#222;max-width:1300px}
nav a{margin-right:14px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:1.6em}
.bar{background:#eee;border-radius:4px;width:180px;height:14px;display:inline-block;
  vertical-align:middle}
.bar i{display:block;height:14px;border-radius:4px;background:#38c}
.online{color:#080}.stale{color:#b00;font-weight:bold}.never-seen{color:#888}
.lagging{color:#b00}.status-shipping{color:#a60}
.status-running{color:#06c;font-weight:bold}.status-done{color:#080}
.status-error,.status-failed{color:#b00}.status-queued{color:#888}
table.live{border-collapse:collapse;margin:8px 0}
table.live td,table.live th{border:1px solid #ccc;padding:3px 8px;text-align:left}
table.live td.n{text-align:right}
.note{color:#666;font-size:.9em}
.ended{color:#080}.stopped{color:#a50}.failed,.dead{color:#b00;font-weight:bold}
"""

LIVE_SCRIPT = """
async function refresh(el) {
  try {
    const r = await fetch(el.dataset.live, {cache: 'no-store'});
    if (r.ok) { el.innerHTML = await r.text(); el.dataset.updated = Date.now(); }
  } catch (e) { /* the next round tries again */ }
}
for (const el of document.querySelectorAll('[data-live]')) {
  setInterval(() => refresh(el), Number(el.dataset.every || 2000));
}
"""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _when(t: float | None) -> str:
    if t is None:
        return "—"
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _href(prefix: str, name: str, keep: str = "") -> str:
    """A link to a page named by a model or campaign key, URL-encoded (a model name has spaces,
    and may hold '/', '#' or '?'); `keep`: characters left as they are (a key's '/')."""
    return prefix + quote(name, safe=keep)


def _several(c: CampaignProgress) -> bool:
    return len({d.model for d in c.drives}) > 1


def _escaped(value: object) -> Markup:
    """Autoescaping as html.escape writes it (the pages' bytes before the templates)."""
    return Markup(value) if hasattr(value, "__html__") else Markup(htmllib.escape(str(value)))


# the pages and their live fragments, from rig/interface/fleet/templates/ (autoescaping on)
PAGES = jinja2.Environment(
    loader=jinja2.PackageLoader("rig.interface.fleet", "templates"),
    autoescape=True,
    finalize=_escaped,
    undefined=jinja2.StrictUndefined,
)
PAGES.filters.update(duration=_duration, when=_when, fmt=format)
PAGES.globals.update(href=_href, several=_several)


def overview_fragment(view: Overview, verdicts: VerdictBoard | None = None) -> str:
    """The overview; with `verdicts`, the report's verdict of each campaign and model; the
    notifications each campaign's station could not deliver (rig/notify/failures.py), a line
    per campaign and kind."""
    running = [c for c in view.campaigns if c.status == "running"]
    cards = [
        (
            "stations online",
            f"{sum(s.state == 'online' for s in view.stations)}/{len(view.stations)}",
        )
        if view.stations
        else ("source", "one station"),
        ("campaigns running", str(len(running))),
        ("drives under test", str(sum(len(c.drives) for c in running))),
        ("cycles per hour", f"{sum(c.per_hour for c in running):.0f}"),
        ("dead drives", str(sum(len(c.dead) for c in view.campaigns))),
        ("rig errors", str(sum(c.rig_errors for c in view.campaigns))),
    ]
    return PAGES.get_template("overview.html.j2").render(
        view=view,
        cards=cards,
        per_campaign={c.key: verdicts.campaign(c) for c in view.campaigns} if verdicts else {},
        models=verdicts.models(view) if verdicts else {},
        undelivered=[
            f"campaign {c.name} on {c.station}: {line}"
            for c in view.campaigns
            for line in c.undelivered.lines()
        ],
    )


def campaign_fragment(c: CampaignProgress, verdicts: VerdictBoard | None = None) -> str:
    campaign_verdicts = {c.key: verdicts.campaign(c)} if verdicts else {}
    return PAGES.get_template("campaign.html.j2").render(c=c, verdicts=campaign_verdicts)


def model_fragment(m: ModelSummary | None) -> str:
    """A model's verdict, counts and drives from the summaries (its per-cut charts: the report)."""
    if m is None or not m.cuts:
        return "<p class='note'>No cut has been recorded yet.</p>"
    return PAGES.get_template("model.html.j2").render(
        m=m,
        classes=m.classes,
        exposure=[exposure_row(e) for e in m.exposure],
        drive_exposure=_drive_exposure,
    )


def _drive_exposure(d: ModelDriveSummary) -> list[str]:
    """Per judged class of a drive: failing/exposed cuts and the upper bound on its failure
    probability per exposed cut (as the report prints it), or not exercised."""
    return [
        f"{e.cls} {e.cuts.failed}/{e.cuts.trials} <= {pct(e.cuts.upper)}"
        if e.cuts.trials
        else f"{e.cls} not exercised"
        for e in d.exposure
    ]


def report_fragment(data: Any) -> str:
    """The HTML report's content for a dataset (its <body>), as `rig report` writes it."""
    if not data.runs:
        return "<p class='note'>No cycle has been recorded yet.</p>"
    page = render_html(analyse(data), time.time())
    start, end = page.find(">", page.find("<body")) + 1, page.rfind("</body>")
    return page[start:end] if 0 < start < end else page


def _page(title: str, body: str) -> str:
    return PAGES.get_template("page.html.j2").render(
        title=title,
        style=Markup(REPORT_STYLE + PAGE_STYLE),
        body=Markup(body),
        script=Markup(LIVE_SCRIPT),
    )


def _live(url: str, content: str, every_ms: int = PROGRESS_EVERY_MS) -> str:
    return PAGES.get_template("live.html.j2").render(
        url=url, every_ms=every_ms, content=Markup(content)
    )


def create_app(view: FleetView, *, dispatch_dsn: str = "", token: str = "") -> Flask:
    app = Flask("rig.interface.fleet.dashboard")
    _add_error_handler(app)
    _add_pages(app, view)
    _add_api(app, view, dispatch_dsn, token)
    _add_metrics(app, view)
    return app


def _add_metrics(app: Flask, view: FleetView) -> None:
    """`/metrics` for Prometheus (rig/interface/fleet/metrics.py), computed from the view's data."""
    from prometheus_client.exposition import choose_encoder

    from rig.interface.fleet import metrics

    own = metrics.registry(metrics.reader_for(view))

    @app.get("/metrics")
    def scrape() -> Response:
        # the text format, or OpenMetrics where the scraper asks for it
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return Response(encode(own), content_type=content_type)


def _find(view: FleetView, key: str) -> CampaignProgress:
    found = next((c for c in view.overview().campaigns if c.key == key), None)
    if found is None:
        abort(404)
    return found


def _known_model(view: FleetView, model: str) -> None:
    """A model no campaign's drive has is a page that does not exist (404), never an empty 200."""
    if model not in view.overview().models:
        abort(404)


def _authorize(token: str, dispatch_dsn: str) -> None:
    """Submit and stop: a configured token, presented exactly."""
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not token or not given or not hmac.compare_digest(given.encode(), token.encode()):
        abort(401)
    if not dispatch_dsn:
        abort(503, "this dashboard has no dispatch role (--dispatch)")


def _add_error_handler(app: Flask) -> None:
    """A page whose data source fails answers 503 (HTTP errors stay what they are)."""

    @app.errorhandler(Exception)
    def failed(error: Exception) -> Any:
        from werkzeug.exceptions import HTTPException

        if isinstance(error, HTTPException):
            return error
        log.warning("page failed: %s: %s", type(error).__name__, error)
        return Response(f"data source unavailable: {type(error).__name__}", status=503)


def _add_pages(app: Flask, view: FleetView) -> None:
    """The overview, campaign and model pages, and the fragments they reload."""
    verdicts = VerdictBoard(view)

    @app.get("/")
    def overview() -> str:
        return _page(
            "Power-fault rig: fleet overview",
            _live("/fragment/overview", overview_live()),
        )

    @app.get("/fragment/overview")
    def overview_live() -> str:
        return overview_fragment(view.overview(), verdicts)

    @app.get("/campaign/<path:key>")
    def campaign(key: str) -> str:
        c = _find(view, key)
        return _page(
            f"Campaign {c.name} on {c.station}",
            _live(f"/fragment/campaign/{quote(key, safe='/')}", campaign_fragment(c, verdicts))
            + "<h2>Report</h2>"
            + _live(
                f"/fragment/campaign-report/{quote(key, safe='/')}",
                report_fragment(view.campaign_dataset(key)),
                REPORT_EVERY_MS,
            ),
        )

    @app.get("/fragment/campaign/<path:key>")
    def campaign_live(key: str) -> str:
        return campaign_fragment(_find(view, key), verdicts)

    @app.get("/fragment/campaign-report/<path:key>")
    def campaign_report(key: str) -> str:
        _find(view, key)
        return report_fragment(view.campaign_dataset(key))

    @app.get("/model/<path:model>")
    def model(model: str) -> str:
        _known_model(view, model)
        return _page(
            f"Model {model}",
            _live(f"/fragment/model/{quote(model, safe='')}", model_live(model), REPORT_EVERY_MS),
        )

    @app.get("/fragment/model/<path:model>")
    def model_live(model: str) -> str:
        _known_model(view, model)
        summaries = view.model_summaries(model)
        if summaries is None:  # a station's stores: the report itself
            return report_fragment(view.model_dataset(model))
        return model_fragment(summaries.get(model))


def _add_api(app: Flask, view: FleetView, dispatch_dsn: str, token: str) -> None:
    """The JSON overview (open), and submit and stop (token and dispatch role)."""

    @app.get("/api/overview")
    def overview_json() -> Response:
        """The rows of `rig fleet status --json`, each with its state and age."""
        from rig.interface import cli_json

        return jsonify(cli_json.fleet_status(view.overview()))

    @app.post("/api/campaigns")
    def submit() -> Any:
        from rig.interface.fleet import dispatch

        _authorize(token, dispatch_dsn)
        try:
            done = dispatch.submit(dispatch_dsn, request.get_data(as_text=True), "request")
        except UserError as error:
            return jsonify({"error": str(error)}), 400
        return jsonify(
            {
                "submission": done.submission_id,
                "station": done.station,
                "job": done.job_id,
                "warning": done.warning,
            }
        ), 201

    @app.post("/api/campaigns/<int:submission_id>/stop")
    def stop(submission_id: int) -> Any:
        from rig.interface.fleet import dispatch

        _authorize(token, dispatch_dsn)
        try:
            return jsonify({"result": dispatch.stop(dispatch_dsn, submission_id)})
        except UserError as error:
            return jsonify({"error": str(error)}), 400


def make_view(central: str, stores: list[str]) -> FleetView:
    return CentralView(central) if central else StoreView(stores)


def serve(
    *,
    central: str,
    stores: list[str],
    dispatch_dsn: str,
    token: str,
    host: str,
    port: int,
    notify_urls: tuple[str, ...] = (),
) -> None:
    import waitress  # type: ignore[import-untyped]

    if dispatch_dsn and not token:
        raise UserError("rig serve: --dispatch needs --token-file (submit and stop need a token)")
    if notify_urls and not central:
        raise UserError("rig serve: --notify watches the fleet's stations: it needs --central")
    for i, url in enumerate(notify_urls):
        settings.check_url(url, f"--notify #{i + 1}")
    view = make_view(central, stores)
    app = create_app(view, dispatch_dsn=dispatch_dsn, token=token)
    if notify_urls:
        notifier = Notifier(apprise_services(notify_urls), _log_notice)
        station_watch.start(view, notifier, threading.Event())
    print(f"dashboard on http://{host}:{port}/ ({view.source})", flush=True)
    waitress.serve(app, host=host, port=port, threads=6, ident="rig")


def _log_notice(kind: str, **fields: Any) -> None:
    """The sender's record of each send and failure, in the server's log."""
    log.info("%s %s", kind, fields)
