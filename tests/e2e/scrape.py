"""Scrape a running llmfix's ``/metrics`` and ``/healthz`` as Prometheus and a load balancer would.

    url = metrics_url(proxy)            # from llmfix's log line (the proxy was started with llmfix_metrics=…:0)
    m = scrape(url)                     # every sample, parsed with prometheus_client's own parser
    m.value("llmfix_requests_total", outcome="repaired")   # the sum over the samples those labels select
    status, body = health(url)

Direct loopback HTTP (no proxy), bounded by a timeout.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import Mitmdump

SERVING = re.compile(r"llmfix metrics: serving (http://127\.0\.0\.1:\d+)/metrics")
TIMEOUT_S = 10.0


def metrics_url(proxy: Mitmdump, nth: int = 1) -> str:
    """``http://127.0.0.1:PORT`` of the ``nth`` metrics server the proxy announced (a reload announces another)."""
    proxy.wait_for_output(re.compile(rf"(?:{SERVING.pattern}[\s\S]*){{{nth}}}"))
    return SERVING.findall(proxy.output())[nth - 1]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Scrape:
    text: str
    samples: list[Sample]
    types: dict[str, str]  # family name → counter, histogram, gauge…

    def value(self, name: str, **labels: str) -> float:
        """The sum of the ``name`` samples whose labels include ``labels`` (0 when there is none)."""
        return sum(s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items())

    def label_sets(self, prefix: str = "llmfix_") -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        """Every series (name and labels) of llmfix's own metrics."""
        return {(s.name, tuple(sorted(s.labels.items()))) for s in self.samples if s.name.startswith(prefix)}

    def values_of(self, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if label in s.labels}


def scrape(url: str) -> Scrape:
    response = httpx.get(f"{url}/metrics", timeout=TIMEOUT_S, trust_env=False)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    samples, types = [], {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        samples += [Sample(s.name, dict(s.labels), s.value) for s in family.samples]
    return Scrape(text, samples, types)


def health(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{url}/healthz", timeout=TIMEOUT_S, trust_env=False)
    return response.status_code, json.loads(response.text)
