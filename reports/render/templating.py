"""The report's Jinja2 environment: the templates of reports/render/templates/, autoescaping on."""

from __future__ import annotations

import jinja2

from reports.render.cells import escape, pct

# Autoescaping on: every value a template shows is escaped unless it is Markup. `finalize`
# escapes it the way html.escape does (the report's bytes have always been that: &#x27; and
# &quot;, where markupsafe writes &#39; and &#34;), so escaping is the same in every template.
ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports.render", "templates"),
    autoescape=True,
    finalize=escape,
    undefined=jinja2.StrictUndefined,
)
ENV.filters.update(pct=pct, fmt=format)
