"""`--output junit`: JUnit XML that CI dashboards read, checked against the Ant/Surefire
schema that Jenkins' JUnit and xUnit plugins (and GitLab, GitHub, Azure readers) accept."""
import xml.etree.ElementTree as ET

import pytest

from cannops.cli.junit import junit_xml
from cannops.cli.engine.results import CaseResult, DeviceInfo, Run
from _ops import ops


# The Surefire / Jenkins JUnit report schema, as those tools define it: <testsuites> of
# <testsuite name tests failures errors> of <testcase name> whose children are failure,
# error, skipped (text + message/type), system-out, system-err; times are decimal seconds.
JUNIT_XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:simpleType name="seconds">
    <xs:restriction base="xs:string">
      <xs:pattern value="(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\\.[0-9]*)?"/>
    </xs:restriction>
  </xs:simpleType>
  <xs:complexType name="outcome" mixed="true">
    <xs:attribute name="message" type="xs:string"/>
    <xs:attribute name="type" type="xs:string"/>
  </xs:complexType>
  <xs:element name="failure" type="outcome"/>
  <xs:element name="error" type="outcome"/>
  <xs:element name="skipped" type="outcome"/>
  <xs:element name="system-out" type="xs:string"/>
  <xs:element name="system-err" type="xs:string"/>
  <xs:element name="property">
    <xs:complexType>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="value" type="xs:string" use="required"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="properties">
    <xs:complexType>
      <xs:sequence><xs:element ref="property" minOccurs="0" maxOccurs="unbounded"/></xs:sequence>
    </xs:complexType>
  </xs:element>
  <xs:element name="testcase">
    <xs:complexType>
      <xs:choice minOccurs="0" maxOccurs="unbounded">
        <xs:element ref="skipped"/>
        <xs:element ref="error"/>
        <xs:element ref="failure"/>
        <xs:element ref="system-out"/>
        <xs:element ref="system-err"/>
      </xs:choice>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="classname" type="xs:string"/>
      <xs:attribute name="time" type="seconds"/>
      <xs:attribute name="group" type="xs:string"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:choice minOccurs="0" maxOccurs="unbounded">
        <xs:element ref="testsuite"/>
        <xs:element ref="properties"/>
        <xs:element ref="testcase"/>
        <xs:element ref="system-out"/>
        <xs:element ref="system-err"/>
      </xs:choice>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="seconds"/>
      <xs:attribute name="timestamp" type="xs:string"/>
      <xs:attribute name="hostname" type="xs:string"/>
      <xs:attribute name="id" type="xs:string"/>
      <xs:attribute name="package" type="xs:string"/>
      <xs:attribute name="group" type="xs:string"/>
      <xs:attribute name="file" type="xs:string"/>
      <xs:attribute name="log" type="xs:string"/>
      <xs:attribute name="url" type="xs:string"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence><xs:element ref="testsuite" minOccurs="0" maxOccurs="unbounded"/></xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="time" type="seconds"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


@pytest.fixture(scope="module")
def schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(JUNIT_XSD)


def check_counts(root: ET.Element) -> None:
    """The counts that dashboards show are those of the elements."""
    assert root.tag == "testsuites"
    totals = dict(tests=0, failures=0, skipped=0)
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        got = dict(tests=len(cases), failures=sum(c.find("failure") is not None for c in cases),
                   skipped=sum(c.find("skipped") is not None for c in cases))
        for k, v in got.items():
            assert int(suite.get(k)) == v, (k, suite.get(k), v)
            totals[k] += v
        assert suite.get("errors") == "0"
        for c in cases:  # at most one outcome per case
            assert len([e for e in c if e.tag in ("failure", "skipped", "error")]) <= 1
    for k, v in totals.items():
        assert int(root.get(k)) == v


def test_failing_case_is_a_failure_element_with_its_reason(schema):
    p = ops("test", "-b", "FAULTY", "-o", "ABS,SGN", "-p", "type=f32", "--output", "junit",
            env={"OPS_FAULTY": "overrun=ABS"})
    assert p.returncode == 1, p.stderr
    schema.validate(p.stdout)
    root = ET.fromstring(p.stdout)
    check_counts(root)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "ops test FAULTY"
    props = {e.get("name"): e.get("value") for e in suite.find("properties")}
    assert props["device"] == "FAULTY" and props["seed"] == "0" and props["ops_filter"] == "ABS,SGN"
    cases = suite.findall("testcase")
    abs_cases = [c for c in cases if c.get("classname") == "FAULTY.ABS"]
    sgn_cases = [c for c in cases if c.get("classname") == "FAULTY.SGN"]
    assert abs_cases and sgn_cases and len(abs_cases) + len(sgn_cases) == len(cases)
    for c in abs_cases:
        f = c.find("failure")
        assert f is not None and c.get("name").startswith("ABS(type=f32")
        assert "sentinel mismatch" in f.get("message") and "sentinel mismatch" in f.text
    assert all(len(c) == 0 for c in sgn_cases)  # passed: no child
    assert int(suite.get("failures")) == len(abs_cases)


def test_not_supported_is_skipped_and_output_is_valid_for_every_command(schema):
    sel = ["-b", "GGML-CPU", "-o", "MUL_MAT(type_a=f32,type_b=f16,m=16,n=1,k=256,bs=[1,1],nr=[1,1],"
           "per=[0,1,2,3],k_v=0,o=1),ABS", "-p", "f16|type=f32,ne_a=\\[128,2,2,2\\]"]
    for cmd in (["test"], ["support"], ["support", "--run"]):
        p = ops(*cmd, *sel, "--output", "junit")
        assert p.returncode == 0, p.stderr
        schema.validate(p.stdout)
        root = ET.fromstring(p.stdout)
        check_counts(root)
        skipped = [c for c in root.iter("testcase") if c.find("skipped") is not None]
        assert [c.get("classname") for c in skipped] == ["GGML-CPU.MUL_MAT"]
        assert skipped[0].find("skipped").get("message").startswith("not supported [GGML-CPU]")
    p = ops("perf", "-b", "GGML-CPU", "-o", "TRI", "--min-time", "0.01", "--output", "junit")
    assert p.returncode == 0, p.stderr
    schema.validate(p.stdout)
    root = ET.fromstring(p.stdout)
    check_counts(root)
    assert all("us/run" in c.find("system-out").text for c in root.iter("testcase"))


def test_hostile_text_still_makes_valid_xml(schema):
    run = Run(mode="test", devices=[DeviceInfo("CANN0")], version="t")
    reason = "worker died: SIGSEGV\n<stderr> & \"quotes\" \x01\x1b[31m ]]> \ud7ff"
    run.results = [CaseResult("CANN0", "ABS", "type=f32", "FAIL", reason=reason, error=0.5, threshold=1e-7,
                              metric="NMSE", index=0),
                   CaseResult("CANN0", "ABS", "type=f16", "known deviation", reason="[ABS] NMSE = 2e-7",
                              note="ggml rounds", index=1),
                   CaseResult("CANN1", "ABS", "type=f32", "skipped", reason="no NPU", index=0)]
    text = junit_xml(run)
    schema.validate(text)
    root = ET.fromstring(text)
    check_counts(root)
    f = root.find(".//failure")
    assert f.get("message") == "worker died: SIGSEGV"
    assert "<stderr> & \"quotes\"" in f.text and "NMSE = 0.5" in f.text
    assert "known deviation" in root.find(".//system-out").text
    # the unavailable device is a suite of skipped cases
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert suites["ops test CANN1"].get("skipped") == "1"
