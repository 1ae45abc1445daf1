"""Test helpers shared by kerasbert's test-suite (and by users' own tests)."""

from kerasbert.testing.test_case import TestCase
