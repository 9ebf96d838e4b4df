"""The page of a cluster several workspaces share (reconcile.views.cluster_html) and where it may link
(reconcile.views.links): pure renderings of hand-made reports, hostile text and addresses among them."""

from __future__ import annotations

import re

from reconcile.model import Action, Change, Plan, QueueInfo, RunView
from reconcile.report import OtherRun, TurnReport
from reconcile.views.cluster_html import OTHER_RUNS_LISTED, Shown, cluster_pages, render_cluster, render_index
from reconcile.views.html import Kept, Site
from reconcile.views.links import commit_url, ray_job_url, web_url
from reconcile.views.queue import ClusterQueueView, Held, Waiting
from state.observed import RunStatus

NOW = 1_714_557_600.0
DASHBOARD = "http://10.0.0.1:8265"
SHA = "9f1c2e3d4b5a69788796a5b4c3d2e1f009182736"
HOSTILE = '<img src=x onerror=alert(1)>"><script>alert(2)</script>'


def test_only_plain_http_urls_become_link_targets():
    for bad in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,<b>x</b>", "//evil.example/",
                'http://x" onmouseover="alert(1)', "http://user:pw@10.0.0.1:8265", "http://", "ftp://10.0.0.1",
                "http://10.0.0.1:8265/\njavascript:x", " http://10.0.0.1", None, ""):
        assert web_url(bad) is None, bad
        assert ray_job_url(bad, "raysubmit_1") is None, bad
    assert web_url("https://ray.example:8265/") == "https://ray.example:8265/"
    assert ray_job_url(DASHBOARD + "/", "a b/c") == f"{DASHBOARD}/#/jobs/a%20b%2Fc"


def test_commits_link_only_to_known_web_hosts_and_never_show_a_token():
    assert commit_url("https://github.com/team/models.git", SHA) == f"https://github.com/team/models/commit/{SHA}"
    assert commit_url("git@github.com:team/models.git", SHA) == f"https://github.com/team/models/commit/{SHA}"
    assert commit_url("https://gitlab.com/org/sub/repo", SHA) == f"https://gitlab.com/org/sub/repo/-/commit/{SHA}"
    tokened = commit_url("https://x-access-token:ghs_SECRET@github.com/team/models", SHA)
    assert tokened == f"https://github.com/team/models/commit/{SHA}" and "SECRET" not in tokened
    for remote, commit in (("https://git.internal.example/team/models.git", SHA), ("/srv/git/models.git", SHA),
                           ("https://github.com/team/models", "none"), ("https://github.com/team/models", HOSTILE),
                           ("javascript:alert(1)//github.com/a/b", SHA), ("https://github.com/", SHA),
                           ("https://github.com/team/models?x=1", SHA), (None, SHA)):
        assert commit_url(remote, commit) is None, (remote, commit)


def test_the_cluster_page_shows_every_workspace_the_shared_queue_and_the_others_runs():
    nlp, vision = shown("nlp"), shown("vision", standby="gpu-host:4242:0a1b2c3d")
    (page,) = cluster_pages([nlp, vision])
    html = render_cluster(page, NOW)
    assert "<h1>argus · cluster local</h1>" in html
    assert f'<a href="{DASHBOARD}" rel="noopener noreferrer">{DASHBOARD}</a>' in html
    assert "nlp</a>: active" in html and "vision</a>: standby (held by gpu-host:4242)" in html
    assert "Shared queue, every workspace&#x27;s, in queue order" in html
    assert re.search(r"<td>1</td><td>nlp</td><td>job\.train</td><td>2</td>.*needs 2 GPU, 1 free", html)
    assert re.search(r"<td>2</td><td>audio</td><td>job\.whisper</td>", html)
    assert "<td>vision</td><td>job.vit</td><td><code>vit-a1</code></td><td>2</td>" in html  # holds resources
    assert "Runs of the other workspaces" in html and "<td>audio</td><td>job.asr</td>" in html
    assert "<td>vision</td><td>job.vit</td><td><code>vit-a1</code></td><td>RUNNING</td>" in html  # standby's run
    assert f'href="{DASHBOARD}/#/jobs/vit-a1"' in html and f'href="{DASHBOARD}/#/jobs/train-a1"' in html
    assert 'href="/logs/train-a1"' in html and 'href="/logs/vit-a1"' not in html  # logs: the acting loop's runs
    assert "2024-05-01 10:00:01 UTC" in html and "2024-05-01 10:05:01 UTC" in html and "<td>5 min</td>" in html
    assert f'href="https://github.com/team/models/commit/{SHA}"' in html
    assert '<section id="ws-nlp"><h2>Workspace nlp: active</h2>' in html and 'id="ws-vision"' in html


def test_two_clusters_get_an_index_and_a_name_two_clusters_share_gets_two_pages():
    a = shown("nlp")
    b = Shown(Kept("vision", {"local": Site("http://10.0.0.2:8265", "/nfs/b")}), None)
    pages = cluster_pages([a, b])
    assert [(p.name, p.address, p.slug) for p in pages] == [("local", DASHBOARD, "local-1"),
                                                            ("local", "http://10.0.0.2:8265", "local-2")]
    index = render_index(pages, NOW)
    assert '<a href="/clusters/local-1">local</a>' in index and '<a href="/clusters/local-2">local</a>' in index
    assert "vision</a>: no turn has finished yet" in render_cluster(pages[1], NOW)


def test_hostile_addresses_names_and_reasons_never_become_markup_or_links():
    evil = Kept("nlp", {"local": Site("javascript:alert(document.domain)", "/nfs")}, remote="javascript:alert(1)")
    queue = ClusterQueueView("local", held=(Held(HOSTILE, HOSTILE, HOSTILE, 1.0, 0, NOW),),
                             waiting=(Waiting(1, HOSTILE, HOSTILE, HOSTILE, 1.0, HOSTILE, 0, NOW, HOSTILE),),
                             gpus=3.0, problem=HOSTILE)
    report = turn("nlp", queues=(queue,), standby=None, commit=HOSTILE,
                  others=(OtherRun("local", HOSTILE, HOSTILE, HOSTILE, RunStatus.RUNNING, NOW),),
                  notes=(HOSTILE,), error=HOSTILE)
    pages = cluster_pages([Shown(evil, report, crashed=HOSTILE)])
    html = render_cluster(pages[0], NOW) + render_index(pages, NOW)
    assert "javascript:" in html, "the address is shown, as text"
    assert not re.search(r'href="\s*javascript', html, re.I) and "<img" not in html and "<script" not in html
    assert set(re.findall(r'href="([^"]*)"', html)) <= {*(f"#{a}" for a in re.findall(r'id="([^"]*)"', html)),
                                                        "/logs/train-a1", "/report/train-a1", "/clusters/local"}
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_runs_of_forged_workspaces_cannot_make_the_page_grow_without_end():
    """Labels are anyone's to write and Ray keeps finished runs: 3,000 finished runs each claiming its own
    workspace list as the newest 40 at most, counted beyond, and a running one is never pushed off."""
    flood = tuple(OtherRun("local", f"forged-{i}", "j", f"f-{i}", RunStatus.SUCCEEDED, NOW - i, NOW - i + 1)
                  for i in range(3000))
    running = OtherRun("local", "vision", "vit", "vit-old", RunStatus.RUNNING, NOW - 10_000)
    (page,) = cluster_pages([Shown(shown("nlp").kept, turn("nlp", standby=None, others=(*flood, running)))])
    html = render_cluster(page, NOW)
    assert html.count("<code>f-") == OTHER_RUNS_LISTED - 1 and "<code>f-0</code>" in html
    assert "<code>vit-old</code>" in html, "an active run comes first, however old"
    assert f"{3001 - OTHER_RUNS_LISTED} older run(s) not shown" in html


# --- helpers ---------------------------------------------------------------------------------------


def shown(workspace: str, standby: str | None = None) -> Shown:
    kept = Kept(workspace, {"local": Site(DASHBOARD, "/nfs")}, remote="https://github.com/team/models.git")
    return Shown(kept, turn(workspace, standby=standby))


def turn(workspace: str, standby: str | None, **fields: object) -> TurnReport:
    waiting = (Waiting(1, "nlp", "train", "train-a2", 2.0, "2 GPU", 0, NOW, "needs 2 GPU, 1 free"),
               Waiting(2, "audio", "whisper", "whisper-a1", 1.0, "1 GPU", 0, NOW, "behind nlp/train"))
    queue = ClusterQueueView("local", held=(Held("vision", "vit", "vit-a1", 2.0, 0, NOW),), waiting=waiting,
                             gpus=3.0)
    others = (OtherRun("local", "vision", "vit", "vit-a1", RunStatus.RUNNING, NOW - 60),
              OtherRun("local", "audio", "asr", "asr-a1", RunStatus.SUCCEEDED, NOW - 600, NOW - 300))
    if standby is not None:
        return TurnReport(workspace=workspace, started_at=NOW, finished_at=NOW, ok=True, interval=30.0, sync="off",
                          standby=standby, notes=(f"standby: {standby} holds the lease of this workspace",))
    ended = RunView(submission_id="train-a1", cluster="local", spec_hash="ab" * 32, attempt=1,
                    status=RunStatus.FAILED, on_ray=True, failure="oom", started_at=NOW + 1, ended_at=NOW + 301)
    plan = Plan(workspace=workspace, changes=(
        Change(address="job.train", action=Action.QUEUE, reason="queued #1 on local", current=ended, queue=QueueInfo(
            cluster="local", submission_id="train-a2", spec_hash="cd" * 32, attempt=2, demand="2 GPU", gpus=2.0,
            position=1, reason="needs 2 GPU, 1 free")),))
    values: dict = {"workspace": workspace, "started_at": NOW - 1, "finished_at": NOW, "ok": True, "interval": 30.0,
                    "sync": "off", "commit": SHA, "plan": plan, "runs": {"train": [ended]}, "queues": (queue,),
                    "others": others, "gpus_held": {"local": {"vision": 2.0}}}
    return TurnReport(**{**values, **fields})
