def test_import():
    import jitgrad
    assert jitgrad.tensor([1.0]).item() == 1.0
