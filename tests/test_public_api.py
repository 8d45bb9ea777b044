import workbench
import workbench.trace


def test_public_surface_is_what_the_docs_promise():
    assert set(workbench.__all__) >= {
        "RunConfig", "ConfigError", "Recorder", "InstrumentedMutex", "InstrumentedBarrier",
        "Trace", "load", "save",
    }
    for name in workbench.__all__:
        assert getattr(workbench, name) is not None
    for name in workbench.trace.__all__:
        assert getattr(workbench.trace, name) is not None


def test_core_imports_without_optional_heavy_libraries():
    import subprocess
    import sys

    code = ("import sys, workbench, workbench.pipeline.run, workbench.cli, workbench.sweep, "
            "workbench.sweep.ray_executor; workbench.cli.build_parser(); "
            "heavy = {'cupy', 'bokeh', 'ipywidgets', 'nvtx', 'ray'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
