"""A stdlib-only LLM client for tests/e2e/test_launcher.py, run BY the llmfix launcher as its CLIENT.

    llmfix [options] -- python launcher_client.py REPORT BODY URL EXIT_STATUS [--wait]

Writes REPORT (JSON): the proxy and CA variables it was given, whether the CA file is a PEM, and, after
POSTing the file BODY to URL the way any urllib client does (proxy from ``https_proxy``, trust from
``SSL_CERT_FILE``), the status and answer; with ``--no-proxy`` it ignores the proxy variables (as
Node 20's ``fetch`` does). With ``--wait`` it then waits (at most 60 s) to be interrupted. Exits with
EXIT_STATUS.
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
        "CODEX_CA_CERTIFICATE", "REQUESTS_CA_BUNDLE", "NODE_USE_ENV_PROXY")


def main() -> int:
    report_path, body_path, url, status = sys.argv[1:5]
    report = {"env": {k: os.environ.get(k) for k in VARS}, "pid": os.getpid()}
    ca = os.environ.get("SSL_CERT_FILE", "")
    with open(ca or os.devnull) as f:
        report["ca_is_pem"] = f.read().startswith("-----BEGIN CERTIFICATE-----")
    with open(body_path, "rb") as f:
        body = f.read()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "authorization": "Bearer sk-test-not-a-real-key-launcher"})
    handlers = [urllib.request.HTTPSHandler(context=ssl.create_default_context())]
    if "--no-proxy" in sys.argv:
        handlers.append(urllib.request.ProxyHandler({}))
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=30) as answer:
            report["status"], report["answer"] = answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        report["status"], report["answer"] = e.code, e.read().decode()
    except OSError as e:
        report["status"], report["answer"] = None, repr(e)
    if "--wait" in sys.argv:
        report["waiting"] = True
    with open(report_path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(report_path + ".tmp", report_path)
    if "--wait" in sys.argv:
        time.sleep(60)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
