"""Task-head forwards shared by the encoders of hf-encoders: token classification and extractive QA.

Like checkpoint_io.py, this file is copied into each flat model folder, and from there into every checkpoint.
A model class using a mixin provides its encoder through `base_model_prefix` (read as `self.base_model`) and
the head's layers: `dropout` and `classifier`, or `qa_outputs`. `token_type_ids` is accepted because BERT-style
tokenizers produce it; the encoders have no segment embedding.
"""

from transformers.modeling_outputs import QuestionAnsweringModelOutput, TokenClassifierOutput


class TokenClassificationMixin:
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        **kwargs,
    ) -> TokenClassifierOutput:
        outputs = self.base_model(
            input_ids, attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = self.loss_function(logits, labels, self.config) if labels is not None else None
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class QuestionAnsweringMixin:
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        **kwargs,
    ) -> QuestionAnsweringModelOutput:
        outputs = self.base_model(
            input_ids, attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs
        )
        start_logits, end_logits = (
            t.squeeze(-1).contiguous() for t in self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        )
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
