"""gpucore.distributed.launcher: the rank and size MPI launchers export, as torchrun's names."""

from gpucore.distributed.launcher import export_torchrun_env, launch_info


def test_open_mpi_variables_become_torchruns():
    env = {
        "OMPI_COMM_WORLD_RANK": "3",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    }
    info = export_torchrun_env(env)
    assert (info.launcher, info.rank, info.world_size) == ("Open MPI", 3, 4)
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "4"
    assert env["LOCAL_RANK"] == "1" and env["LOCAL_WORLD_SIZE"] == "2"


def test_values_already_set_are_kept():
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "RANK": "7"}
    export_torchrun_env(env)
    assert env["RANK"] == "7" and env["WORLD_SIZE"] == "2"
    # without a local rank the launcher's own rank and size stand in
    assert env["LOCAL_RANK"] == "1" and env["LOCAL_WORLD_SIZE"] == "2"


def test_slurm_and_pmix():
    assert launch_info({"SLURM_PROCID": "0", "SLURM_NTASKS": "6"}).world_size == 6
    info = launch_info({"SLURM_PROCID": "2", "SLURM_NTASKS": "6", "SLURM_NTASKS_PER_NODE": "3(x2)"})
    assert info.local_world_size == 3
    assert launch_info({"PMIX_RANK": "1", "PMIX_SIZE": "2"}).launcher == "PMIx"


def test_outside_a_launcher_nothing_is_set():
    env = {"HOME": "/root"}
    assert export_torchrun_env(env) is None
    assert env == {"HOME": "/root"}


def test_inconsistent_values_are_ignored():
    assert launch_info({"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}) is None
    assert launch_info({"PMI_RANK": "x", "PMI_SIZE": "2"}) is None
