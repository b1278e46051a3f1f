"""The neuron device itself: loading, names, indices, the torch.neuron module and torch.accelerator."""
import pytest
import torch

from fresh_python import run_python


def test_autoload_makes_neuron_usable_after_import_torch_alone():
    r = run_python("import torch; t = torch.ones(2, device='neuron'); print(t.device, t.sum().item())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "2.0"]


def test_autoload_disabled_leaves_device_unregistered_until_import():
    code = ("import torch\n"
            "try:\n    torch.ones(1, device='neuron'); print('registered')\n"
            "except RuntimeError:\n    print('unregistered')\n"
            "import torch_neuronx\nprint(torch.ones(1, device='neuron').device)")
    r = run_python(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["unregistered", "neuron:0"]


def test_autoload_failure_is_one_warning_and_import_torch_still_works():
    r = run_python("import torch; print('imported', torch.__version__)", env={"LOCALNEURON_TARGET": "trn9"})
    assert r.returncode == 0, r.stderr
    assert "imported" in r.stdout
    assert "LOCALNEURON_TARGET='trn9' is not valid: expected one of trn2, trn3" in r.stderr
    assert r.stderr.count("the neuron device is not available") == 1


def test_device_indices_and_generated_methods():
    assert torch.neuron.device_count() == 4  # one trn2 chip: 4 logical NeuronCores (LNC=2)
    t = torch.arange(6).neuron()
    assert t.is_neuron and t.device == torch.device("neuron", 0)
    u = torch.ones(3, device="neuron:2")
    assert u.device.index == 2 and u.get_device() == 2
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.device.type == "neuron"
    assert torch.device("privateuseone").type == "neuron"


def test_set_device_range_error_and_device_context():
    with pytest.raises(ValueError, match=r"Invalid device id: 4\. Valid range is 0 to 3"):
        torch.neuron.set_device(4)
    with torch.neuron.device(3):
        assert torch.neuron.current_device() == 3
        assert torch.empty(1, device="neuron").device.index == 3
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(torch.device("neuron:1"))
    assert torch.neuron.current_device() == 1



@pytest.mark.parametrize("make", [lambda: torch.tensor([2.0]).to("neuron:20"), lambda: torch.empty(1, device="neuron:4")])
def test_a_tensor_on_a_core_the_process_does_not_see_is_a_runtime_error_naming_the_range(make):
    with pytest.raises(RuntimeError, match=r"Device index (20|4) is out of range\. Valid range is 0 to 3 for this "
                                           r"process \(LOCALNEURON_CHIPS and NEURON_RT_VISIBLE_CORES"):
        make()

@pytest.mark.parametrize("device,index", [(1, 1), (0, 0), (torch.device("neuron:2"), 2), ("neuron:3", 3), (None, 2)])
def test_torch_neuron_set_device_goes_through_torch_neuronx_set_device(monkeypatch, device, index):
    """As in TorchNeuron: torch.neuron (the same module as torch_neuronx.neuron) hands the index to
    torch_neuronx.set_device, looked up at each call, so replacing that function sees every call (None: the
    current device)."""
    import torch_neuronx
    import torch_neuronx.neuron

    assert torch_neuronx.neuron is torch.neuron
    torch.neuron.set_device(2)
    calls = []
    monkeypatch.setattr(torch_neuronx, "set_device", calls.append)
    torch.neuron.set_device(device)
    assert calls == [index] and torch.neuron.current_device() == 2
    monkeypatch.undo()
    torch.neuron.set_device(device)
    assert torch.neuron.current_device() == index


def test_device_names_and_properties():
    assert torch.neuron.get_device_name(1) == "neuron:1"
    assert torch.neuron.get_device_name(torch.device("neuron:2")) == "neuron:2"
    with pytest.raises(ValueError, match="Incorrect device argument"):
        torch.neuron.get_device_name("neuron:0")
    props = torch.neuron.get_device_properties(0)
    assert props.total_memory == 24 * 2**30 and "trn2" in props.name
    assert torch.neuron.is_available() and torch.neuron.is_initialized()
    assert torch.neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]
    assert torch.neuron.is_bf16_supported()


def test_target_selection_and_visible_cores():
    code = ("import torch; p = torch.neuron.get_device_properties(0); "
            "print(torch.neuron.device_count(), p.total_memory // 2**30, p.name)")
    r = run_python(code, env={"LOCALNEURON_TARGET": "trn3"})
    assert r.returncode == 0, r.stderr
    count, gib, *_ = r.stdout.split()
    assert (count, gib) == ("4", "36") and "trn3" in r.stdout
    r = run_python("import torch; print(torch.neuron.device_count())", env={"NEURON_RT_VISIBLE_CORES": "1-2"})
    assert r.stdout.strip() == "2", r.stderr
    r = run_python("import torch; print(torch.neuron.device_count())", env={"NEURON_RT_VISIBLE_CORES": "7"})
    assert "NEURON_RT_VISIBLE_CORES='7' names core 7" in r.stderr


def test_torch_accelerator_answers_for_neuron():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.is_available() and torch.accelerator.device_count() == 4
    torch.accelerator.set_device_index(2)
    assert torch.accelerator.current_device_index() == 2 == torch.neuron.current_device()
    torch.accelerator.synchronize()
    torch.neuron.synchronize()


def test_torch_neuronx_exposes_public_names():
    import torch_neuronx

    for name in ["device_count", "current_device", "set_device", "get_device_properties", "synchronize",
                 "empty_cache", "is_neuron_runtime_initialized", "current_stream", "default_stream",
                 "set_stream", "stream", "device", "Stream", "Event", "memory_allocated", "memory_stats",
                 "get_fallback_ops", "get_executed_ops", "clear_op_tracking", "memory"]:
        assert hasattr(torch_neuronx, name), name
    with pytest.raises(ValueError, match="Invalid device id"):
        torch_neuronx.set_device(9)


def test_interpreter_exit_after_a_device_backward_is_clean():
    # Without draining the autograd device threads at exit this aborted in about 40% of runs here: three runs in each
    # of CI's two passes (this folder runs in both modes) miss that with a chance of 0.6**6, under 5%.
    code = ("import torch\n"
            "x = torch.randn(3, requires_grad=True)\n"
            "x.to('neuron').sum().backward()\n"
            "print(x.grad.tolist())\n")
    for _ in range(3):
        r = run_python(code)
        assert r.returncode == 0 and r.stdout.strip() == "[1.0, 1.0, 1.0]", (r.returncode, r.stderr[-300:])


# an allocation, and ops run whole whose results a host kernel makes and the device adopts (the second call of a
# signature hits the executable cache: the parent made the first)
@pytest.mark.parametrize("make", ["torch.empty(1, device='neuron')", "torch.ones(1, device='neuron')"])
def test_forked_child_of_an_initialized_parent_cannot_use_the_device(make):
    code = ("import os, torch\n"
            f"{make}\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            f"    try:\n        {make}\n        os._exit(0)\n"
            "    except RuntimeError as e:\n"
            "        print(e, flush=True)\n        os._exit(3 if torch.neuron._is_in_bad_fork() else 4)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('child', os.waitstatus_to_exitcode(status))\n")
    r = run_python(code)
    assert "Cannot re-initialize Neuron runtime in forked subprocess. To use Neuron with multiprocessing, use the 'spawn' start method" in r.stdout
    assert "child 3" in r.stdout, r.stdout + r.stderr


def test_ranks_per_node_size_the_simulated_instance():
    r = run_python("import torch; print(torch.neuron.device_count())", env={"LOCAL_WORLD_SIZE": "8"})
    assert r.stdout.strip() == "8", r.stderr  # two trn2 chips, 4 logical cores each


def test_device_context_with_an_index_no_device_has_raises_value_error():
    count = torch.neuron.device_count()
    for missing in (count, count + 10, -2, f"neuron:{count}", torch.device("neuron", count)):
        with pytest.raises(ValueError, match=rf"Invalid device id: -?\d+\. Valid range is 0 to {count - 1}: this "
                                             r"process sees .* NEURON_RT_VISIBLE_CORES"):
            with torch.neuron.device(missing):
                pass
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(-1):  # as torch.cuda.device: -1 and None leave the current device
        assert torch.neuron.current_device() == 0
