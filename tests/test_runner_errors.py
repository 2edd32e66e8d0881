import runner.errors as E


def test_hierarchy_and_docstrings():
    for name, cls in E.BY_NAME.items():
        assert issubclass(cls, E.RunnerError)
        assert cls.__doc__ and "\n" not in cls.__doc__.strip(), name
    for cls in (E.SandboxUnavailable, E.RunnerBusy, E.ProtocolError):
        assert cls.__name__ in E.BY_NAME
