"""The fake Kubernetes API server (tests/kubeapi.py) read by the real `kubernetes_asyncio`
client that the prefect-kubernetes worker uses, through a kubeconfig like the worker's: if the
fake's wire format drifts from what the client parses, these fail here rather than as a hang or
a vague error inside the worker test."""

from __future__ import annotations

import asyncio

import pytest

from tests.kubeapi import FakeKube, field_match, label_match

JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"generateName": "infopt-", "labels": {"app": "infopt"}},
       "spec": {"backoffLimit": 0, "template": {"spec": {
           "restartPolicy": "Never",
           "containers": [{"name": "prefect-job", "image": "registry.example/infopt:cuda",
                           "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}


async def _client(kube: FakeKube, tmp_path):
    from kubernetes_asyncio import config

    return await config.new_client_from_config(
        config_file=str(kube.write_kubeconfig(tmp_path / "kubeconfig")))


def test_a_job_runs_its_pod_to_completion(tmp_path):
    from kubernetes_asyncio.client import BatchV1Api, CoreV1Api

    async def scenario():
        async with await _client(kube, tmp_path) as api:
            batch, core = BatchV1Api(api), CoreV1Api(api)
            job = await batch.create_namespaced_job("default", JOB)
            name = job.metadata.name
            again = await batch.read_namespaced_job(name, "default")
            pods = await core.list_namespaced_pod("default", label_selector=f"job-name={name}")
            log = await core.read_namespaced_pod_log(pods.items[0].metadata.name, "default")
            events = await core.list_namespaced_event(
                "default", field_selector=f"involvedObject.name={name}")
            return job, again, pods, log, events

    with FakeKube() as kube:
        job, again, pods, log, events = asyncio.run(scenario())
        stored_events = kube.objects("events", "default")
    assert job.kind == "Job" and job.api_version == "batch/v1"
    assert job.metadata.name.startswith("infopt-") and len(job.metadata.name) == 12
    assert job.status.succeeded is None  # the create answer: nothing has run yet
    assert again.status.succeeded == 1
    assert [c.type for c in again.status.conditions][-1] == "Complete"
    (pod,) = pods.items
    assert pod.status.phase == "Succeeded"
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
    assert pod.metadata.owner_references[0].uid == job.metadata.uid
    assert pod.metadata.name in log
    assert {e.reason for e in events.items} == {"SuccessfulCreate", "Completed"}
    assert {e["reason"] for e in stored_events} == {"SuccessfulCreate", "Scheduled", "Started",
                                                    "Completed"}
    assert kube.created_of("Job")[0]["metadata"]["name"] == job.metadata.name


def test_errors_come_back_as_api_exceptions(tmp_path):
    from kubernetes_asyncio.client import BatchV1Api
    from kubernetes_asyncio.client.exceptions import ApiException

    named = {**JOB, "metadata": {"name": "fixed"}}

    async def status_of(call):
        try:
            await call
        except ApiException as e:
            return e.status, e.reason
        return 200, None

    async def scenario():
        async with await _client(kube, tmp_path) as api:
            batch = BatchV1Api(api)
            await batch.create_namespaced_job("default", named)
            answers = [await status_of(batch.create_namespaced_job("default", named)),
                       await status_of(batch.create_namespaced_job("missing", JOB)),
                       await status_of(batch.read_namespaced_job("nope", "default"))]
            kube.token = "rotated"  # the kubeconfig's token is now wrong
            answers.append(await status_of(batch.list_job_for_all_namespaces()))
            return answers

    with FakeKube() as kube:
        answers = asyncio.run(scenario())
    assert answers == [(409, "Conflict"), (404, "Not Found"), (404, "Not Found"),
                       (401, "Unauthorized")]


def test_watch_streams_then_ends_and_delete_takes_the_pods(tmp_path):
    from kubernetes_asyncio import watch
    from kubernetes_asyncio.client import BatchV1Api, CoreV1Api

    async def scenario():
        async with await _client(kube, tmp_path) as api:
            batch, core = BatchV1Api(api), CoreV1Api(api)
            job = await batch.create_namespaced_job("default", JOB)
            seen = [(e["type"], e["object"].status.phase) async for e in watch.Watch().stream(
                core.list_namespaced_pod, "default", timeout_seconds=5,
                label_selector=f"controller-uid={job.metadata.uid}")]
            await batch.delete_namespaced_job(job.metadata.name, "default",
                                              propagation_policy="Foreground")
            left = await core.list_pod_for_all_namespaces()
            return seen, left

    with FakeKube() as kube:
        seen, left = asyncio.run(scenario())
    assert seen == [("ADDED", "Succeeded")]
    assert left.items == []


def test_a_failing_pod_fails_the_job(tmp_path):
    from kubernetes_asyncio.client import BatchV1Api

    async def scenario():
        async with await _client(kube, tmp_path) as api:
            batch = BatchV1Api(api)
            job = await batch.create_namespaced_job("default", JOB)
            return await batch.read_namespaced_job_status(job.metadata.name, "default")

    with FakeKube(pod_succeeds=False) as kube:
        job = asyncio.run(scenario())
    assert job.status.failed == 1 and job.status.succeeded is None
    assert job.status.conditions[-1].type == "Failed"


def test_discovery_and_a_patched_secret(tmp_path):
    from kubernetes_asyncio.client import (
        ApisApi,
        BatchV1Api,
        CoreApi,
        CoreV1Api,
        V1ObjectMeta,
        V1Secret,
        VersionApi,
    )

    async def scenario():
        async with await _client(kube, tmp_path) as api:
            core = CoreV1Api(api)
            found = [(await VersionApi(api).get_code()).git_version,
                     (await CoreApi(api).get_api_versions()).versions,
                     [g.name for g in (await ApisApi(api).get_api_versions()).groups],
                     {r.name for r in (await core.get_api_resources()).resources},
                     {r.name for r in (await BatchV1Api(api).get_api_resources()).resources}]
            # What the worker does with env stored as a Secret: create, then own it by the Job.
            await core.create_namespaced_secret("default", V1Secret(
                metadata=V1ObjectMeta(name="run-env"), string_data={"A": "1"}))
            await core.patch_namespaced_secret("run-env", "default", {"metadata": {
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                     "uid": "u1"}]}})
            return found, await core.read_namespaced_secret("run-env", "default")

    with FakeKube() as kube:
        (version, core_versions, groups, core_res, batch_res), secret = asyncio.run(scenario())
    assert version.startswith("v1.") and core_versions == ["v1"] and groups == ["batch"]
    assert {"pods", "pods/log", "events", "namespaces"} <= core_res and batch_res == {"jobs"}
    assert secret.kind == "Secret" and secret.data == {"A": "MQ=="} and not secret.string_data
    assert secret.metadata.owner_references[0].uid == "u1"


@pytest.mark.parametrize("selector,expected", [
    ("job-name=a", True), ("job-name==a", True), ("job-name!=a", False),
    ("job-name in (b, a),app", True), ("job-name notin (a)", False), ("!app", False),
    ("missing", False), ("app=x,job-name=b", False)])
def test_label_selectors(selector, expected):
    assert label_match({"job-name": "a", "app": "x"}, selector) is expected


def test_field_selectors():
    ev = {"involvedObject": {"name": "j1", "kind": "Job"}, "type": "Normal"}
    assert field_match(ev, "involvedObject.name=j1,type=Normal")
    assert not field_match(ev, "involvedObject.name=j2")
    assert field_match(ev, "involvedObject.kind!=Pod")
