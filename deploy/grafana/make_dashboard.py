#!/usr/bin/env python3
"""Writes deploy/grafana/tachyon.json, the Grafana dashboard of a Tachyon fleet
scraped by Prometheus: the views of /dashboard (latency per route and backend,
traffic, caches, router and trimmer, backends, local engines, telemetry).

    python3 deploy/grafana/make_dashboard.py > deploy/grafana/tachyon.json

The datasource is a variable (${datasource}); $route and $backend filter the
panels. tests/deploy/grafana_check.py checks that the JSON is this script's
output and that every tachyon:* name it queries is one a live server exports.
"""
import json

DS = {"type": "prometheus", "uid": "${datasource}"}
ROUTE = 'route=~"$route"'
BACKEND = 'backend=~"$backend"'


def q(expr, legend):
    return {"expr": expr, "legendFormat": legend}


def hq(quantile, metric, by, match):
    return (f"histogram_quantile({quantile}, sum by ({by}, le) "
            f"(rate({metric}_bucket{{{match}}}[$__rate_interval])))")


def rate(metric, by, match=""):
    return f"sum by ({by}) (rate({metric}{{{match}}}[$__rate_interval]))"


ROWS = [
    ("Latency", [
        ("TTFT by route", "s", [q(hq(0.5, "tachyon:time_to_first_token_seconds", "route", ROUTE), "{{route}} p50"),
                                q(hq(0.95, "tachyon:time_to_first_token_seconds", "route", ROUTE), "{{route}} p95")]),
        ("End-to-end latency by route", "s",
         [q(hq(0.5, "tachyon:e2e_request_latency_seconds", "route", ROUTE), "{{route}} p50"),
          q(hq(0.95, "tachyon:e2e_request_latency_seconds", "route", ROUTE), "{{route}} p95")]),
        ("Inter-token latency p95 by route", "s",
         [q(hq(0.95, "tachyon:inter_token_latency_seconds", "route", ROUTE), "{{route}}")]),
        ("TTFT p95 by backend", "s",
         [q(hq(0.95, "tachyon:time_to_first_token_seconds", "backend", f"{ROUTE},{BACKEND}"), "{{backend}}")]),
        ("Upstream first byte p95", "s",
         [q(hq(0.95, "tachyon:upstream_first_byte_seconds", "backend", BACKEND), "{{backend}}")]),
        ("Engine queue time p95", "s",
         [q(hq(0.95, "tachyon:request_queue_time_seconds", "backend", BACKEND), "{{backend}}")]),
    ]),
    ("Traffic", [
        ("Requests/s by route", "reqps", [q(rate("tachyon:route_requests_total", "route", ROUTE), "{{route}}")]),
        ("Answers/s by outcome", "reqps",
         [q(rate("tachyon:request_success_total", "route", ROUTE), "{{route}} ok"),
          q(rate("tachyon:request_error_total", "route", ROUTE), "{{route}} error"),
          q(rate("tachyon:request_cancelled_total", "route", ROUTE), "{{route}} cancelled")]),
        ("Errors/s by kind", "reqps", [q(rate("tachyon:request_error_total", "route, kind", ROUTE), "{{route}} {{kind}}")]),
        ("Rejected before a route", "reqps", [q(rate("tachyon:request_rejected_total", "kind"), "{{kind}}")]),
        ("Retries and fallbacks", "reqps",
         [q(rate("tachyon:route_retries_total", "route", ROUTE), "{{route}} retries"),
          q(rate("tachyon:route_fallbacks_total", "route", ROUTE), "{{route}} fallbacks")]),
        ("Open client connections", "short", [q("sum(tachyon:http_connections)", "connections")]),
    ]),
    ("Caches", [
        ("Cache hit rate", "percentunit",
         [q(rate("tachyon:cache_lookups_total", "route, kind", ROUTE + ',result="hit"') + " / " +
            rate("tachyon:cache_lookups_total", "route, kind", ROUTE + ',result=~"hit|miss"'), "{{route}} {{kind}}")]),
        ("Cached prompt tokens/s (engine prefix cache, provider prompt cache)", "short",
         [q(rate("tachyon:prompt_cached_tokens_total", "route", ROUTE), "{{route}}")]),
        ("Cache size", "bytes", [q("sum by (kind) (tachyon:cache_bytes)", "{{kind}}")]),
        ("Cache entries", "short", [q("sum by (kind) (tachyon:cache_entries)", "{{kind}}")]),
        ("Cache store errors/s", "short", [q(rate("tachyon:cache_store_errors_total", "store, reason"),
                                             "{{store}} {{reason}}")]),
        ("Semantic candidates turned away/s", "short",
         [q(rate("tachyon:cache_semantic_rejections_total", "reason"), "{{reason}}")]),
    ]),
    ("Router and trimmer", [
        ("Router decisions/s by class", "short",
         [q(rate("tachyon:router_decisions_total", "route, class", ROUTE), "{{route}} {{class}}")]),
        ("Router decision time p95", "s", [q(hq(0.95, "tachyon:router_decision_seconds", "route", ROUTE), "{{route}}")]),
        ("Trimmed tokens/s by step", "short",
         [q(rate("tachyon:trimmed_tokens_total", "route, step", ROUTE), "{{route}} {{step}}")]),
    ]),
    ("Backends", [
        ("Breaker state (0 closed, 1 open, 2 half-open)", "short",
         [q(f"max by (backend) (tachyon:backend_breaker_state{{{BACKEND}}})", "{{backend}}")]),
        ("Requests in flight", "short",
         [q(f"sum by (backend) (tachyon:backend_requests_in_flight{{{BACKEND}}})", "{{backend}}")]),
        ("TTFT EWMA", "s", [q(f"max by (backend) (tachyon:backend_ttft_ewma_seconds{{{BACKEND}}})", "{{backend}}")]),
        ("Backend errors/s by kind", "short",
         [q(rate("tachyon:backend_errors_total", "backend, kind", BACKEND), "{{backend}} {{kind}}")]),
    ]),
    ("Local engines", [
        ("KV cache in use", "percentunit",
         [q(f"max by (backend) (tachyon:kv_cache_usage_perc{{{BACKEND}}})", "{{backend}}")]),
        ("Sequences running and waiting", "short",
         [q(f"sum by (backend) (tachyon:num_requests_running{{{BACKEND}}})", "{{backend}} running"),
          q(f"sum by (backend) (tachyon:num_requests_waiting{{{BACKEND}}})", "{{backend}} waiting")]),
        ("Decode batch size", "short",
         [q(f'{rate("tachyon:engine_decode_sequences_total", "backend", BACKEND)} / '
            f'{rate("tachyon:engine_decode_steps_total", "backend", BACKEND)}', "{{backend}}")]),
        ("Generated tokens/s", "short", [q(rate("tachyon:generation_tokens_total", "backend", BACKEND), "{{backend}}")]),
        ("Prefix cache hit rate", "percentunit",
         [q(f'{rate("tachyon:prefix_cache_hits_total", "backend", BACKEND)} / '
            f'{rate("tachyon:prefix_cache_queries_total", "backend", BACKEND)}', "{{backend}}")]),
        ("Speculative acceptance", "percentunit",
         [q(f'{rate("tachyon:spec_decode_num_accepted_tokens_total", "backend", BACKEND)} / '
            f'{rate("tachyon:spec_decode_num_draft_tokens_total", "backend", BACKEND)}', "{{backend}}")]),
    ]),
    ("Telemetry", [
        ("Spans exported and dropped/s", "short",
         [q("sum(rate(tachyon:otel_spans_exported_total[$__rate_interval]))", "exported"),
          q("sum(rate(tachyon:otel_spans_dropped_total[$__rate_interval]))", "dropped")]),
        ("Config reloads", "short", [q("sum by (result) (tachyon:config_reloads_total)", "{{result}}")]),
    ]),
]


def dashboard():
    panels, y, next_id = [], 0, 1
    for title, row in ROWS:
        panels.append({"type": "row", "id": next_id, "title": title, "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        next_id += 1
        y += 1
        for k, (name, unit, targets) in enumerate(row):
            refs = [dict(t, refId=chr(ord("A") + i), datasource=DS) for i, t in enumerate(targets)]
            panels.append({"type": "timeseries", "id": next_id, "title": name, "datasource": DS,
                           "gridPos": {"h": 8, "w": 8, "x": 8 * (k % 3), "y": y + 8 * (k // 3)},
                           "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                           "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                                       "tooltip": {"mode": "multi"}},
                           "targets": refs})
            next_id += 1
        y += 8 * ((len(row) + 2) // 3)

    def variable(name, metric):
        query = f"label_values({metric}, {name})"
        return {"name": name, "label": name, "type": "query", "datasource": DS, "definition": query,
                "query": {"query": query, "refId": name}, "refresh": 2, "includeAll": True, "multi": True,
                "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "sort": 1}

    return {
        "title": "Tachyon",
        "uid": "tachyon",
        "description": "TTFT and total latency per route and backend, traffic, caches, router, backends and local "
                       "engines of a Tachyon fleet (deploy/grafana/make_dashboard.py)",
        "tags": ["tachyon", "llm"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            variable("route", "tachyon:route_requests_total"),
            variable("backend", "tachyon:backend_requests_in_flight"),
        ]},
        "panels": panels,
    }


if __name__ == "__main__":
    print(json.dumps(dashboard(), indent=1))
