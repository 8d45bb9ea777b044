import sys
import types

from workbench.trace import InstrumentedMutex, Recorder


class FakeDomain:
    def __init__(self, log):
        self.log = log

    def get_event_attributes(self, message):
        return ("attrs", message)

    def push_range(self, attributes):
        self.log.append(("push", attributes[1]))

    def pop_range(self):
        self.log.append(("pop", None))


def fake_nvtx(log, domains):
    module = types.ModuleType("nvtx")

    def get_domain(name):
        domains.append(name)
        return FakeDomain(log)

    module.get_domain = get_domain
    return module


def test_spans_and_lock_phases_become_balanced_nvtx_ranges_in_domain_workbench(monkeypatch):
    log, domains = [], []
    monkeypatch.setitem(sys.modules, "nvtx", fake_nvtx(log, domains))
    recorder = Recorder()
    assert recorder.nvtx.available and domains == ["workbench"]
    mutex = InstrumentedMutex("gpu0", recorder)
    with mutex.hold(worker=0), recorder.span("worker/0", "ntt_msm_h"):
        pass
    assert log == [("push", "mutex_wait"), ("pop", None), ("push", "mutex_hold"),
                   ("push", "ntt_msm_h"), ("pop", None), ("pop", None)]


def test_no_ranges_when_nvtx_is_missing_or_tracing_is_off(monkeypatch):
    log, domains = [], []
    monkeypatch.setitem(sys.modules, "nvtx", fake_nvtx(log, domains))
    recorder = Recorder(enabled=False)
    with recorder.span("worker/0", "x"):
        pass
    assert not recorder.nvtx.available and log == [] and domains == []
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx now raises ImportError
    recorder = Recorder()
    assert not recorder.nvtx.available
    with recorder.span("worker/0", "x"):
        pass
    assert len(recorder.spans) == 1
