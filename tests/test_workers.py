def test_process_info_command_and_executable_describe_this_process_and_a_gone_one():
    import os
    import sys

    from verigym.workers import process_command, process_executable, process_info

    me = process_info(os.getpid())
    assert me is not None and me.parent == os.getppid() and me.state in "RS" and me.start_ticks > 0
    assert process_executable(os.getpid()) == os.path.realpath(sys.executable)
    assert process_command(os.getpid()).split(b"\0")[0] == os.fsencode(sys.orig_argv[0])
    gone = 2**22 + 7  # above pid_max's default ceiling: never a live process
    assert process_info(gone) is None and process_command(gone) is None
    assert process_executable(gone) is None
