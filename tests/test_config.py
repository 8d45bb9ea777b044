import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.config import ConfigError, RunConfig, field_names


@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("gpu_workers", 0, "integer from 1 to 16"),
    ("gpu_workers", "2", "integer from 1 to 16"),
    ("gpu_workers", True, "integer from 1 to 16"),
    ("synth_threads", 1000, "integer from 1 to 256"),
    ("synth_lookahead", 0, "integer from 1"),
    ("memory_mode", "mapped", "pageable | pinned | zerocopy | registered"),
    ("lock_scope", "fine", "coarse | compute"),
    ("backend", "tpu", "auto | cpu | gpu"),
    ("bool_fraction", 1.5, "number from 0 to 1"),
    ("bool_fraction", "0.5", "number from 0 to 1"),
    ("log2_constraints", 40, "integer from 2 to 27"),
    ("partitions", -1, "integer from 1"),
    ("seed", -3, "integer from 0"),
])
def test_bad_values_name_field_value_and_what_is_allowed(field, value, allowed):
    with pytest.raises(ConfigError) as info:
        RunConfig(**{field: value})
    message = str(info.value)
    assert info.value.field == field
    assert field in message and repr(value) in message and allowed in message


def test_unknown_field_in_json_is_named():
    with pytest.raises(ConfigError, match="gpu_worker"):
        RunConfig.from_json(json.dumps({"gpu_worker": 2}))


def test_malformed_json_is_reported():
    with pytest.raises(ConfigError, match="valid JSON"):
        RunConfig.from_json("{not json")
    with pytest.raises(ConfigError, match="JSON object"):
        RunConfig.from_json("[1, 2]")


def test_replace_rejects_unknown_fields():
    with pytest.raises(ConfigError, match="colour"):
        RunConfig().replace(colour="red")


@given(
    gpu_workers=st.integers(1, 16), synth_threads=st.integers(1, 256),
    memory_mode=st.sampled_from(["pageable", "pinned", "zerocopy", "registered"]),
    bool_fraction=st.floats(0, 1), seed=st.integers(0, 2**63 - 1),
    log2=st.integers(2, 27),
)
def test_json_round_trip_is_exact(gpu_workers, synth_threads, memory_mode, bool_fraction, seed, log2):
    config = RunConfig(gpu_workers=gpu_workers, synth_threads=synth_threads, memory_mode=memory_mode,
                       bool_fraction=bool_fraction, seed=seed, log2_constraints=log2)
    again = RunConfig.from_json(config.to_json())
    assert again == config
    assert set(json.loads(config.to_json())) == set(field_names())
