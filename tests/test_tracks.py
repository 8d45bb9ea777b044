"""The track grammar (model/tracks.py): every name it builds parses back to what was built,
every parsed value builds back to its name, and no text makes the parser fail."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.model import tracks as tr

# The machine is shared: slow draws are the machine's, not the strategies'.
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

numbers = st.integers(min_value=0, max_value=10**6)
# Names of foreign threads and locks, callers' tracks, device record kinds: any text but
# the empty string (`thread/` alone names nothing, and is kind OTHER).
names = st.text(min_size=1, max_size=30)

# Every builder, with what `parse` must find in the name it builds.
BUILT = {
    tr.SYNTH: (st.builds(tr.synth_track, numbers), lambda t: t.thread >= 0),
    tr.WORKER: (st.builds(tr.worker_track, numbers), lambda t: t.worker >= 0),
    tr.PREP: (st.builds(tr.prep_track, numbers), lambda t: t.worker >= 0),
    tr.MUTEX: (st.builds(tr.mutex_track, numbers), lambda t: t.gpu >= 0),
    tr.BARRIER: (st.builds(tr.barrier_track, numbers), lambda t: t.worker >= 0),
    tr.KERNELS: (st.builds(tr.stream_track, numbers, numbers), lambda t: t.gpu >= 0 and t.stream >= 0),
    tr.COPIES: (st.builds(tr.copy_track, numbers), lambda t: t.gpu >= 0),
    tr.MEMSETS: (st.builds(tr.memset_track, numbers), lambda t: t.gpu >= 0),
    tr.COUNTERS: (st.builds(tr.nvml_track, numbers), lambda t: t.gpu >= 0),
    tr.THREAD: (st.builds(tr.thread_track, st.one_of(numbers, names)), lambda t: t.name != ""),
    tr.CUDA_API: (st.builds(tr.cuda_track, names), lambda t: t.name != ""),
    tr.OS_API: (st.builds(tr.os_track, names), lambda t: t.name != ""),
    tr.LOCK: (st.builds(tr.lock_track, names), lambda t: t.name != ""),
    tr.QUEUE: (st.just(tr.QUEUE_TRACK), lambda t: True),
    tr.RUN: (st.just(tr.RUN_TRACK), lambda t: True),
    tr.HOST_LOAD: (st.just(tr.HOST_LOAD_TRACK), lambda t: True),
    tr.SAMPLED: (st.just(tr.SAMPLED_TRACK), lambda t: True),
}

# Track values as `parse` gives them: each kind with only the fields it carries.
DEVICE_NAMES = names.filter(lambda s: s not in ("copy", "memset")
                            and not re.fullmatch(r"stream/(0|[1-9][0-9]*)", s))
OTHER_NAMES = st.text(max_size=30).filter(lambda s: tr.parse(s).kind == tr.OTHER)
TRACKS = {
    tr.SYNTH: st.builds(tr.Track, st.just(tr.SYNTH), thread=numbers),
    tr.WORKER: st.builds(tr.Track, st.just(tr.WORKER), worker=numbers),
    tr.PREP: st.builds(tr.Track, st.just(tr.PREP), worker=numbers),
    tr.MUTEX: st.builds(tr.Track, st.just(tr.MUTEX), gpu=numbers),
    tr.BARRIER: st.builds(tr.Track, st.just(tr.BARRIER), worker=numbers),
    tr.KERNELS: st.builds(tr.Track, st.just(tr.KERNELS), gpu=numbers, stream=numbers),
    tr.COPIES: st.builds(tr.Track, st.just(tr.COPIES), gpu=numbers),
    tr.MEMSETS: st.builds(tr.Track, st.just(tr.MEMSETS), gpu=numbers),
    tr.DEVICE: st.builds(tr.Track, st.just(tr.DEVICE), gpu=numbers, name=DEVICE_NAMES),
    tr.COUNTERS: st.builds(tr.Track, st.just(tr.COUNTERS), gpu=numbers),
    tr.THREAD: st.builds(tr.Track, st.just(tr.THREAD), name=names),
    tr.CUDA_API: st.builds(tr.Track, st.just(tr.CUDA_API), name=names),
    tr.OS_API: st.builds(tr.Track, st.just(tr.OS_API), name=names),
    tr.LOCK: st.builds(tr.Track, st.just(tr.LOCK), name=names),
    tr.QUEUE: st.just(tr.Track(tr.QUEUE)),
    tr.RUN: st.just(tr.Track(tr.RUN)),
    tr.HOST_LOAD: st.just(tr.Track(tr.HOST_LOAD)),
    tr.SAMPLED: st.just(tr.Track(tr.SAMPLED)),
    tr.OTHER: st.builds(tr.Track, st.just(tr.OTHER), name=OTHER_NAMES),
}


def test_every_kind_is_generated():
    kinds = {v for k, v in vars(tr).items() if k.isupper() and not k.startswith("_") and isinstance(v, str)
             and not k.endswith("_TRACK")}
    assert set(TRACKS) == kinds
    assert set(BUILT) == kinds - {tr.DEVICE, tr.OTHER}  # both built from a parsed value only


@SETTINGS
@given(st.sampled_from(sorted(BUILT)).flatmap(lambda kind: st.tuples(st.just(kind), BUILT[kind][0])))
def test_a_built_name_parses_to_its_kind_and_builds_back(case):
    kind, name = case
    parsed = tr.parse(name)
    assert parsed.kind == kind and BUILT[kind][1](parsed), parsed
    assert tr.build(parsed) == name


@SETTINGS
@given(st.sampled_from(sorted(TRACKS)).flatmap(lambda kind: TRACKS[kind]))
def test_a_track_value_builds_a_name_that_parses_back_to_it(track):
    assert tr.parse(tr.build(track)) == track


PREFIXED = st.from_regex(r"(gpu|mutex/gpu|worker/|synth/|barrier/worker|nvml/gpu|thread/|cuda/|os/|lock/)"
                        r"[0-9/a-z٣]{0,8}", fullmatch=True)


@SETTINGS
@given(st.one_of(st.text(max_size=40), PREFIXED))
def test_parse_takes_any_text_and_builds_it_back(text):
    parsed = tr.parse(text)
    assert tr.build(parsed) == text
    if parsed.kind == tr.OTHER:
        assert parsed.name == text


def test_known_names():
    assert tr.parse("gpu1/stream/7") == tr.Track(tr.KERNELS, gpu=1, stream=7)
    assert tr.parse("worker/3/prep") == tr.Track(tr.PREP, worker=3)
    assert tr.parse("os/worker/0").caller == tr.Track(tr.WORKER, worker=0)
    assert tr.parse("gpu0/sync") == tr.Track(tr.DEVICE, gpu=0, name="sync")
    # Not the grammar's: leading zeros, digits of other scripts, a bare prefix.
    for text in ("worker/01", "gpu٣/copy", "thread/", "mutex/gpu", "worker/0/prepx"):
        assert tr.parse(text) == tr.Track(tr.OTHER, name=text)
