"""Test helpers shared by kerasbert's test-suite (and by users' own tests)."""

from kerasbert.testing.decisions import assert_same_choice
from kerasbert.testing.decisions import assert_same_decisions
from kerasbert.testing.decisions import decided
from kerasbert.testing.decisions import top2_margin
from kerasbert.testing.fixtures import tiny_encoder_config
from kerasbert.testing.fixtures import tiny_encoder_inputs
from kerasbert.testing.test_case import TestCase
