"""Chat templates come inside model files: rendered exactly, and only inside the sandbox."""

from __future__ import annotations

import json
import re

import pytest

from engine import ChatTemplateError, Message, Model
from engine.chat import CHATML_TEMPLATE, ChatTemplate, template_for, tokenize_prompt

CONVERSATION = [
    Message("system", "Be brief."),
    Message("user", "Hi"),
    Message("assistant", "Hello!"),
    Message("user", "Sort [3,1,2]"),
]
CHATML_CONVERSATION = (
    "<|im_start|>system\nBe brief.<|im_end|>\n"
    "<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n"
    "<|im_start|>user\nSort [3,1,2]<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def qwen(target_path):
    model = Model(target_path, vocab_only=True)
    yield model
    model.close()


@pytest.fixture(scope="module")
def smollm(smollm_path):
    model = Model(smollm_path, vocab_only=True)
    yield model
    model.close()


@pytest.fixture(scope="module")
def gemma(gemma_path):
    model = Model(gemma_path, vocab_only=True)
    yield model
    model.close()


def test_qwen_renders_the_conversation_ready_for_the_reply(qwen):
    template = template_for(qwen)
    assert not template.is_fallback
    assert template.source == qwen.info.chat_template
    rendered = template.render(CONVERSATION)
    assert rendered == CHATML_CONVERSATION
    assert rendered.endswith("<|im_start|>assistant\n")
    assert not template.render(CONVERSATION, add_generation_prompt=False).endswith("<|im_start|>assistant\n")


def test_qwen_adds_its_default_system_prompt(qwen):
    rendered = template_for(qwen).render([Message("user", "Hi")])
    assert rendered == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_rendered_prompt_tokenizes_its_special_tokens(qwen):
    tokens = tokenize_prompt(qwen, template_for(qwen).render([Message("user", "Hi")]))
    im_start, im_end = qwen.tokenize("<|im_start|>"), qwen.tokenize("<|im_end|>")
    assert len(im_start) == len(im_end) == 1
    assert tokens[0] == im_start[0]  # Qwen adds no BOS
    assert tokens.count(im_start[0]) == 3 and tokens.count(im_end[0]) == 2
    assert qwen.token_text(im_start[0]) == "<|im_start|>"


def test_smollm2_template_renders(smollm):
    template = template_for(smollm)
    assert not template.is_fallback
    assert template.render(CONVERSATION) == CHATML_CONVERSATION
    assert template.render([Message("user", "Hi")]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_model_without_a_template_falls_back_to_chatml(gemma):
    assert gemma.info.chat_template is None  # the base Gemma 3 270M ships none
    template = template_for(gemma)
    assert template.is_fallback
    assert template.source == CHATML_TEMPLATE
    assert template.render(CONVERSATION) == CHATML_CONVERSATION
    assert (template.bos_token, template.eos_token) == ("<bos>", "<eos>")
    # Gemma wants its BOS: the prompt gets it even though the template does not write it
    tokens = tokenize_prompt(gemma, template.render([Message("user", "Hi")]))
    assert tokens[0] == gemma.bos
    assert tokens.count(gemma.bos) == 1


def test_no_template_and_empty_template_both_fall_back():
    for source in (None, ""):
        template = ChatTemplate(source)
        assert template.is_fallback
        assert template.render([Message("user", "x")]) == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"


def test_enable_thinking_reaches_the_template():
    template = ChatTemplate(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: "
        "{% if enable_thinking %}<think>\n{% else %}<think></think>\n{% endif %}{% endif %}"
    )
    messages = [Message("user", "2+2?")]
    assert template.render(messages, thinking=True) == "user: 2+2?\nassistant: <think>\n"
    assert template.render(messages, thinking=False) == "user: 2+2?\nassistant: <think></think>\n"


def test_bos_eos_tojson_and_strftime_are_available():
    template = ChatTemplate(
        "{{ bos_token }}{{ messages | tojson }}|{{ {'a': 'café'} | tojson(indent=None) }}|"
        "{{ strftime_now('%Y') }}{{ eos_token }}",
        bos_token="<s>",
        eos_token="</s>",
    )
    rendered = template.render([Message("user", "naïve")], add_generation_prompt=False)
    head, middle, tail = rendered.split("|")
    assert head == "<s>" + json.dumps([{"role": "user", "content": "naïve"}], ensure_ascii=False)
    assert middle == '{"a": "café"}'
    assert re.fullmatch(r"\d{4}</s>", tail)


def test_raise_exception_becomes_a_chat_template_error():
    template = ChatTemplate(
        "{% if messages[0]['role'] != 'user' %}"
        "{{ raise_exception('Conversations must start with a user turn.') }}"
        "{% endif %}"
    )
    assert template.render([Message("user", "hi")]) == ""
    with pytest.raises(ChatTemplateError) as caught:
        template.render([Message("assistant", "hi")])
    assert str(caught.value) == "The model's chat template failed: Conversations must start with a user turn."


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.append(1) }}",
        "{{ messages[0].update({'role': 'system'}) }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ raise_exception.__globals__ }}",
        # probes that would otherwise render as nothing and carry on
        "{{ ''.__class__ }}",
        "{% set g = raise_exception.__globals__ %}fine",
        "{{ ''|attr('__class__') }}",
        "{{ '{0.__class__}'.format('') }}",
    ],
)
def test_escaping_the_sandbox_is_stopped(source):
    template = ChatTemplate(source)
    with pytest.raises(ChatTemplateError) as caught:
        template.render([Message("user", "hi")])
    message = str(caught.value)
    assert message.startswith("The model's chat template tried to reach outside its sandbox and was stopped (")
    assert "unsafe" in message


def test_ordinary_template_idioms_still_work():
    template = ChatTemplate(
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{{ m.content.strip().upper() }}{{ m.items() | list | length }}{% endfor %}{{ ns.n }}"
        "{% if tools is defined %}tools{% endif %}"
    )
    assert template.render([Message("user", " a "), Message("assistant", "b")]) == "A2B22"


def test_a_stopped_template_changes_nothing():
    messages = [Message("user", "hi")]
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ messages.append('x') }}").render(messages)
    assert messages == [Message("user", "hi")]


def test_a_syntax_error_is_a_chat_template_error():
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate("{% for m in messages %}{{ m['content'] }}\n\n{% endfor")
    message = str(caught.value)
    assert message.startswith("The model's chat template does not parse (line 3: ")


def test_an_undefined_name_is_a_chat_template_error():
    with pytest.raises(ChatTemplateError, match=r"^The model's chat template failed: 'tools' is undefined$"):
        ChatTemplate("{{ tools.name }}").render([Message("user", "hi")])
